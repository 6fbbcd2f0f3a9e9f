"""Workload kind `checkpoint`, its campaign entry and host calls: MLPerf Storage's checkpointing (write and fsync,
drop caches, read back)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from iolab.schema import Bool
from iolab.units import human
from iolab.workloads.base import LOADER_TIMEOUT, At, HostCall, Workload, does_not_fit
from iolab.workloads.mlperf import CHECKPOINT_MODELS

TOOL = "iolab.kinds.checkpoint.host"  # what its host call runs on each host (python -m)


class CheckpointWorkload(Workload):
    """MLPerf Storage's checkpointing: each rank writes its shard (fsync), caches dropped, each rank reads it back.

    `scale` shrinks the model's checkpoint to what a lab holds (llama3-8b at 0.01 is 1.05 GB);
    the checkpoint is shared by every rank of every host: `writers` processes per host, or `ranks`
    processes in all, spread over the run's hosts (MLPerf's counts are of the whole job; a DLIO
    file's llama3 workload sets them so). Each host checks its ranks fit its memory before they start.
    `checkpoints` are written one after the other, then read back (MLPerf's rules: 10, `mlperf: true`);
    `accelerator` is the emulated accelerator whose memory must hold the checkpoint (rule 4.3.4), and
    `subset: true` MLPerf's subset run, defined for llama3-8b on 8 processes only (rule 4.3.5).
    """

    type: Literal["checkpoint"]
    host_program: ClassVar[str] = f"python -m {TOOL}"
    model: Literal["llama3-8b", "llama3-70b", "llama3-405b", "llama3-1t"] = "llama3-8b"
    scale: Annotated[float, Field(gt=0, le=1)] = 1.0
    writers: Annotated[int, Field(ge=1, le=1024, strict=True)] = 8  # strict: `true` is not a count
    ranks: Annotated[int, Field(ge=1, le=65536, strict=True)] | None = None
    checkpoints: Annotated[int, Field(ge=1, le=100, strict=True)] = 1
    accelerator: Literal["b200", "mi355", "h100", "a100"] = "b200"
    subset: Bool = False

    @model_validator(mode="after")
    def _at_least_a_mebibyte(self) -> CheckpointWorkload:
        if self.ranks is not None and "writers" in self.model_fields_set:
            raise ValueError("give writers (per host) or ranks (in all, spread over the hosts), not both")
        if self.subset and (self.model != "llama3-8b" or self.ranks != CHECKPOINT_MODELS["llama3-8b"][1]):
            raise ValueError(
                "subset: MLPerf Storage defines a subset run for llama3-8b on 8 processes only (rule 4.3.5): "
                "give model: llama3-8b and ranks: 8, or drop subset"
            )
        if self.bytes < (self.ranks or self.writers) << 20:
            raise ValueError(
                f"scale {self.scale:g} leaves {self.bytes} bytes of {self.model}'s checkpoint, less "
                f"than 1 MiB for each of the {self.ranks or self.writers} {'ranks' if self.ranks else 'writers'}; "
                "raise scale"
            )
        return self

    @property
    def bytes(self) -> int:
        """The whole checkpoint's size at this scale (MLPerf's size times `scale`)."""
        return int(CHECKPOINT_MODELS[self.model][0] * self.scale)

    @property
    def room(self) -> int:
        """Bytes its checkpoints hold on the target at once: every one is written before the first is read."""
        return self.bytes * self.checkpoints

    @property
    def writes(self) -> str:
        return f"checkpoint {self.model}"

    def too_big(self, where: str, size: int) -> str | None:
        held = f"checkpoint ({human(self.room, 'B', si=True)})"
        fix = ", which holds all of it in a run on one host; lower the workload's scale or raise the backend's size"
        return does_not_fit(self.name, held, self.room, where, size, fix)

    def role_vars(self, target: str) -> dict[str, Any]:
        return {
            "bench_checkpoint_target": target,
            "bench_checkpoint_bytes": self.bytes,
            "bench_checkpoint_writers": self.writers,
            "bench_checkpoint_ranks": self.ranks or 0,
            "bench_checkpoint_count": self.checkpoints,
            "bench_checkpoint_timeout": self.run_timeout(LOADER_TIMEOUT),
        }

    def describe(self) -> str:
        size, processes = CHECKPOINT_MODELS[self.model]
        return (
            f"checkpoint of {self.model} at scale {self.scale:g} ({human(self.bytes, 'B', si=True)} of "
            f"{human(size, 'B', si=True)}; "
            f"MLPerf writes it with {processes} processes), "
            + (f"{self.ranks} ranks spread over the hosts" if self.ranks else f"{self.writers} writers per host")
            + (
                f": {self.checkpoints} checkpoints written, each ending in fsync, "
                if self.checkpoints > 1
                else ": write + fsync, "
            )
            + "caches dropped on every host, read back"
            + (f"; MLPerf Storage's rules checked ({self.accelerator} accelerators)" if self.mlperf_rules else "")
        )


# role_vars' names without their prefix: what host_call takes (iolab.kinds.hostcall)
CHECKPOINT_VARS = ("target", "bytes", "writers", "ranks", "count", "timeout")


def host_call(at: At, *, target: str, bytes: int, writers: int, ranks: int, count: int, timeout: float) -> HostCall:
    """A checkpoint's calls on a host, in MLPerf Storage's order (iolab.kinds.hostcall): `first`, on every host
    or none, the check that its memory holds its ranks and the target their shards, then the write of its shards,
    fsynced (the write phase's own record in RUN/write); then, once every host has written, the caches dropped (and
    the storage side's) and the read back, the shards removed. The job's ranks: `ranks`, or `writers` on each host,
    spread over the play's hosts by iolab.kinds.checkpoint.host (the first world % hosts hosts one more)."""
    hosts = at.play.hosts
    world = ranks or len(hosts) * writers
    shard = str(bytes // world)
    argv = at.module(TOOL, "--dir", f"{target}/iolab-{at.host}/checkpoint", "--out", at.run_dir)
    argv += ["--world", str(world), "--hosts", str(len(hosts)), "--index", str(hosts.index(at.host))]
    argv += ["--count", str(count)]
    options = ["--target", target, "--timeout", str(timeout), "--cwd", target, "--telemetry-after", "0"]
    write = HostCall(
        [*argv, "check", "--bytes-per-rank", shard],
        at.module("iolab.host.hostrun", "run", "--dir", f"{at.run_dir}/write", "--no-pack", *options),
        [*argv, "write", "--bytes-per-rank", shard],
        {},
        "Check each host's memory holds its ranks and the target their shards",
        "Write the checkpoint, every rank its shard, fsynced",
    )
    drop = (
        at.module("iolab.host.caches", "--dir", at.run_dir)
        if at.drop
        else at.module("iolab.host.prepare", "directory", "--dir", at.run_dir)
    )
    return HostCall(
        drop,
        at.hostrun(*options),
        [*argv, "read", "--remove"],
        {},
        "Drop the caches on every host, once every host has written",
        "Read the checkpoint back, every rank its shard, then remove it",
        first=write,
    )
