"""Workload kind `metadata`, its campaign entry and host call: readdir, stat and open/close rates over a tree."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from iolab.schema import Bool
from iolab.workloads.base import LOADER_PREPARE_TASK, LOADER_TIMEOUT, At, HostCall, Workload, loader_call

TOOL = "iolab.kinds.metadata.host"  # what its host call runs on each host (python -m)


class MetadataWorkload(Workload):
    """readdir, stat and open/close rates over the data set's tree (the small-file metadata bottleneck)."""

    type: Literal["metadata"]
    host_program: ClassVar[str] = f"python -m {TOOL}"
    threads: Annotated[int, Field(ge=1, le=1024)] = 1
    limit: Annotated[int, Field(ge=1)] | None = None  # files per operation, at most (default: all)
    drop_caches: Bool = True  # before each operation, not only before the run

    uses_dataset: ClassVar[bool] = True

    def role_vars(self, target: str) -> dict[str, Any]:
        return {
            "bench_metadata_target": target,
            "bench_metadata_threads": self.threads,
            "bench_metadata_limit": self.limit or 0,
            "bench_metadata_drop_caches": self.drop_caches,
            "bench_metadata_timeout": self.run_timeout(LOADER_TIMEOUT),
        }

    def dataset_vars(self, root: str) -> dict[str, Any]:
        return {"bench_metadata_dataset": root}

    def describe(self) -> str:
        return f"readdir, then stat, then open+close of every data set file with {self.threads} thread(s)" + (
            ", caches dropped before each" if self.drop_caches else ""
        )


# What the metadata role takes from the controller, by the name host_call gives it (bench_metadata_<name>).
METADATA_VARS = ("target", "dataset", "threads", "limit", "drop_caches", "timeout")


def host_call(
    at: At,
    *,
    target: str,
    timeout: float,
    threads: int,
    limit: int = 0,
    dataset: str = "",
    drop_caches: bool = True,
) -> HostCall:
    """A metadata run's call on `host` (iolab.kinds.hostcall): the tree walk (python -m
    iolab.kinds.metadata.host), the caches dropped before each of its operations too unless `drop_caches` is off
    (`drop`: the run's cache policy, before the run)."""
    root, prepare, run = loader_call("metadata", at, target=target, dataset=dataset, timeout=timeout)
    tool = at.module(TOOL, "--root", root, "--out", at.run_dir)
    tool += ["--threads", str(threads), "--limit", str(limit)]
    tool += ["--drop-caches" if drop_caches else "--no-drop-caches"]
    return HostCall(prepare, run, tool, {}, LOADER_PREPARE_TASK, "Measure readdir, stat and open rates")
