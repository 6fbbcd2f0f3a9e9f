"""Workload kind `metadata`: readdir, stat and open/close rates over the data set's tree."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from iolab.schema import Bool
from iolab.workloads.base import LOADER_TIMEOUT, Workload


class MetadataWorkload(Workload):
    """readdir, stat and open/close rates over the data set's tree (the small-file metadata bottleneck)."""

    type: Literal["metadata"]
    threads: Annotated[int, Field(ge=1, le=1024)] = 1
    limit: Annotated[int, Field(ge=1)] | None = None  # files per operation, at most (default: all)
    drop_caches: Bool = True  # before each operation, not only before the run

    tool: ClassVar[str] = "metadata"
    uses_dataset: ClassVar[bool] = True
    formats: ClassVar[set[str]] = set()

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
