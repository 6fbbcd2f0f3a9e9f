"""Backend kind `rbd`: an RBD image read and written by fio's rbd engine (librbd, no file system)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from iolab.backends.base import LAB_CEPH, CephBackend, FioWorkload, Workload
from iolab.schema import (
    AbsPath,
    Bool,
    Name,
    Size,
)
from iolab.shared import fio_options

if TYPE_CHECKING:
    from iolab.schema import Dataset


class RbdBackend(CephBackend):
    """An RBD image read and written by fio's rbd engine through librbd: Ceph's block baseline, no file system.

    The image is created and written in full once (prefill): reads of never-written
    extents return zeros without reaching the OSDs and would measure nothing.
    """

    name: Name
    type: Literal["rbd"]
    pool: Name = LAB_CEPH["pool"]
    image: Name | None = None  # default: iolab-<name>
    size: Size = 1 << 30
    prefill: Bool = True
    mountpoint: AbsPath | None = None  # nothing is mounted: fio's work directory on each host

    @property
    def image_name(self) -> str:
        return self.image or f"iolab-{self.name}"

    def role_vars(self, state: str, dataset: Dataset | None = None, formats: Sequence[str] = ()) -> dict[str, Any]:
        return {**super().role_vars(state), "storage_rbd_image": self.image_name}

    def supports(self, workload: Workload) -> bool:
        """fio's workloads only: the others need a file system (a campaign runs them on its other backends)."""
        return workload.tool == "fio"

    def refuse(self, workload: Workload) -> str | None:
        fio = cast(FioWorkload, workload)  # supports(): fio's workloads only
        if fio.jobfile:
            return (
                f"workload {workload.name}: backend {self.name} runs fio's built-in profiles with the "
                "rbd engine; a job file cannot be rewritten for it"
            )
        if fio.size and fio.size > self.size:
            return f"workload {workload.name}: size {fio.size} exceeds the image ({self.size} bytes)"
        return None

    def run_vars(self, workload: Workload, variables: dict[str, Any]) -> dict[str, Any]:
        fio = cast(FioWorkload, workload)  # supports(): fio's workloads only
        options = {**variables["bench_fio_options"], **fio_options.rbd_options(self.pool, self.image_name, self.client)}
        # librados finds the cluster through CEPH_CONF and the key through CEPH_ARGS.
        return {
            **variables,
            "bench_fio_options": options,
            "bench_fio_size": fio.size or self.size,
            "run_environment": {"CEPH_CONF": self.ceph_conf, "CEPH_ARGS": f"--keyring {self.keyring}"},
        }
