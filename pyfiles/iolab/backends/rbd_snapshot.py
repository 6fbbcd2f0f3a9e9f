"""Backend kind `rbd_snapshot`: a data set in a Ceph RBD image, snapshotted once and mapped read-only on every host."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from iolab.backends.base import LAB_CEPH, CephBackend
from iolab.schema import (
    AbsPath,
    MountOption,
    Name,
    Size,
)

if TYPE_CHECKING:
    from iolab.schema import Dataset
    from iolab.workloads.base import Workload


class RbdSnapshotBackend(CephBackend):
    """A data set in a Ceph RBD image, snapshotted once and mapped read-only on every host.

    The image gets an ext4 file system holding `source` (a directory on the first selected
    host) or the campaign's generated data set, and a fio file of `fio_size` for fio's read
    profiles; then snapshot `snapshot`, protected. Each host maps the snapshot read-only
    (krbd, else rbd-nbd, else QEMU's storage daemon over FUSE) and mounts it read-only.
    """

    name: Name
    type: Literal["rbd_snapshot"]
    pool: Name = LAB_CEPH["pool"]
    image: Name | None = None  # default: iolab-<name>
    snapshot: Name = "dataset"
    size: Size = 10 << 30  # thin: only what is written takes space
    source: AbsPath | None = None
    fio_size: Size | None = None
    method: Literal["auto", "krbd", "nbd", "qemu-fuse"] = "auto"
    options: list[MountOption] = []
    mountpoint: AbsPath | None = None

    @property
    def writable(self) -> bool:
        return False

    @property
    def image_name(self) -> str:
        return self.image or f"iolab-{self.name}"

    def role_vars(self, state: str, dataset: Dataset | None = None, formats: Sequence[str] = ()) -> dict[str, Any]:
        variables = super().role_vars(state)
        variables["storage_rbd_snapshot_image"] = self.image_name
        variables["storage_rbd_snapshot_fio_size"] = self.fio_size or 0
        # Without a source, the campaign's data set is generated into the image (once).
        variables["storage_rbd_snapshot_dataset"] = (
            {**dataset.identity(), "formats": list(formats)} if dataset and not self.source else {}
        )
        return variables

    def refuse(self, workload: Workload) -> str | None:
        from iolab.workloads.fio import FioWorkload

        reason = super().refuse(workload)
        if reason or not isinstance(workload, FioWorkload):
            return reason
        if workload.jobfile:
            return (
                f"workload {workload.name}: a job file cannot run on backend {self.name}, a read-only "
                "snapshot where fio cannot lay out its files; use a read profile"
            )
        if not self.fio_size:
            return (
                f"workload {workload.name} reads a fio file but backend {self.name} holds none: give the "
                "backend fio_size (e.g. 1GiB), laid out once in the image before the snapshot"
            )
        if workload.size and workload.size != self.fio_size:
            return (
                f"workload {workload.name}: size {workload.size} differs from the fio file of backend "
                f"{self.name} (fio_size {self.fio_size}); leave size out, or make it fio_size"
            )
        return None

    def run_vars(self, workload: Workload, variables: dict[str, Any]) -> dict[str, Any]:
        if workload.tool == "fio":
            variables = {**variables, "bench_fio_size": self.fio_size or 0}
        return variables
