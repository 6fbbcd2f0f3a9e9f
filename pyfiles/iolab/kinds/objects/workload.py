"""Workload kind `objects`: S3 PUT then GET of objects of one size, by threads on every host, timed after a ramp."""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from iolab.schema import Duration, Ramp, Size
from iolab.units import human
from iolab.workloads.base import At, HostCall, Workload

FILL_S = 120.0  # the timeout's allowance for writing the keys once and deleting them


TOOL = "iolab.kinds.objects.host"  # what its host call runs on each host (python -m)


class ObjectsWorkload(Workload):
    """S3 PUT then GET of `size`-byte objects by `threads` threads on each host (runs on s3 backends).

    Each host writes its `objects` keys once (untimed), then overwrites them for
    ramp + runtime (PUT), then reads them in random order for ramp + runtime (GET);
    requests ending in the ramp are the warm-up and not counted. Lists sweep: size:
    [4KiB, 1MiB, 16MiB], threads: [1, 8], and hosts_sweep for the hosts.
    """

    type: Literal["objects"]
    host_program: ClassVar[str] = f"python -m {TOOL}"
    size: Size = 1 << 20
    threads: Annotated[int, Field(ge=1, le=256)] = 4
    objects: Annotated[int, Field(ge=1, le=100_000)] = 64
    runtime: Duration = 10.0
    ramp: Ramp = 2.0
    seed: int = 0

    needs_s3: ClassVar[bool] = True
    writes: ClassVar[str] = "PUT objects"

    def params(self) -> dict[str, Any]:
        """`size` as `object_size`: what the run measures, not how big it is (a report row per object size)."""
        params = super().params()
        params["object_size"] = params.pop("size")
        return params

    def role_vars(self, target: str) -> dict[str, Any]:
        return {
            "bench_objects_size": self.size,
            "bench_objects_threads": self.threads,
            "bench_objects_objects": self.objects,
            "bench_objects_runtime": self.runtime,
            "bench_objects_ramp": self.ramp,
            "bench_objects_seed": self.seed,
            "bench_objects_timeout": self.run_timeout(2 * (self.ramp + self.runtime) + FILL_S),
            "bench_objects_keep_going": bool(self.faults),  # a faulted run counts failed requests and goes on
        }

    def describe(self) -> str:
        return (
            f"S3 objects of {human(self.size, 'B')}: {self.objects} keys per host written once, then PUT and GET "
            f"by {self.threads} threads per host, each {self.ramp:g} s warm-up + {self.runtime:g} s timed"
        )


OBJECTS_PREPARE_TASK = "Make the run directory and drop the caches"  # roles/bench_objects' task names
OBJECTS_VARS = ("s3", "size", "threads", "objects", "runtime", "ramp", "seed", "timeout", "keep_going")


def host_call(
    at: At,
    *,
    s3: dict[str, Any],
    size: int,
    threads: int,
    objects: int,
    runtime: float,
    ramp: float,
    seed: int,
    timeout: float,
    keep_going: bool = False,
) -> HostCall:
    """An objects run's call on `host` (iolab.kinds.hostcall): the run directory and the cache drop (nothing is
    mounted, but every run's host starts alike), then iolab.kinds.objects.host on the host's keys
    (<prefix>/iolab-<host>/objects). `s3` is the backend's connection: where the keys are (a file on the host, or
    the host's own environment), never the keys (docs/DESIGN.md, "Secrets")."""
    drop = ["--drop-caches"] if at.drop else []
    prepare = at.module("iolab.host.prepare", "directory", "--dir", at.run_dir, *drop)
    run = at.hostrun("--timeout", str(timeout), "--telemetry-after", "0")
    tool = at.module(TOOL, "--s3", json.dumps(s3), "--workdir", f"iolab-{at.host}/objects")
    tool += ["--out", at.run_dir, "--size", str(size), "--threads", str(threads), "--objects", str(objects)]
    tool += ["--runtime", str(runtime), "--ramp", str(ramp), "--seed", str(seed)]
    tool += ["--keep-going"] if keep_going else []
    return HostCall(prepare, run, tool, {}, OBJECTS_PREPARE_TASK, "PUT then GET objects on every host")
