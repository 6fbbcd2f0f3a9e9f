"""Backend kind `rbd_snapshot`: a data set in a Ceph RBD image, snapshotted once and mapped read-only on every host."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import model_validator

from iolab.backends.base import LAB_CEPH, CephBackend, FioWorkload, Workload
from iolab.schema import (
    AbsPath,
    Bool,
    MountOption,
    Name,
    Size,
)

if TYPE_CHECKING:
    from iolab.schema import Dataset


class RbdSnapshotBackend(CephBackend):
    """A data set in a Ceph RBD image, snapshotted once and mapped read-only on every host.

    The image gets an ext4 file system holding `source` (a directory on the first selected
    host) or the campaign's generated data set, and a fio file of `fio_size` for fio's read
    profiles; then snapshot `snapshot`, protected. Each host maps the snapshot read-only
    (krbd, else rbd-nbd, else QEMU's storage daemon over FUSE) and mounts it read-only.

    `scratch: true` maps the image itself read-write instead, on one host (an ext4 file system
    mounted read-write on two would be corrupted), with an ext4 file system made the first time:
    a target for workloads that write (the KV-cache workload, fio's writes); nothing is loaded,
    nothing snapshotted.
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
    scratch: Bool = False

    @model_validator(mode="after")
    def _scratch_loads_nothing(self) -> RbdSnapshotBackend:
        if self.scratch and (self.source or self.fio_size):
            raise ValueError(
                "scratch: true maps the image itself read-write and loads nothing: drop source and fio_size"
            )
        return self

    @property
    def writable(self) -> bool:
        return self.scratch

    @property
    def image_name(self) -> str:
        return self.image or f"iolab-{self.name}"

    def role_vars(self, state: str, dataset: Dataset | None = None, formats: Sequence[str] = ()) -> dict[str, Any]:
        variables = super().role_vars(state)
        variables["storage_rbd_snapshot_image"] = self.image_name
        variables["storage_rbd_snapshot_fio_size"] = self.fio_size or 0
        # Without a source, the campaign's data set is generated into the image (once).
        variables["storage_rbd_snapshot_dataset"] = (
            {**dataset.identity(), "formats": list(formats)} if dataset and not self.source and not self.scratch else {}
        )
        return variables

    def refuse(self, workload: Workload) -> str | None:
        reason = super().refuse(workload)
        if reason or workload.tool != "fio" or self.scratch:  # fio lays out its file on a scratch
            return reason
        fio = cast(FioWorkload, workload)
        if fio.jobfile:
            return (
                f"workload {workload.name}: a job file cannot run on backend {self.name}, a read-only "
                "snapshot where fio cannot lay out its files; use a read profile"
            )
        if not self.fio_size:
            return (
                f"workload {workload.name} reads a fio file but backend {self.name} holds none: give the "
                "backend fio_size (e.g. 1GiB), laid out once in the image before the snapshot"
            )
        if fio.size and fio.size != self.fio_size:
            return (
                f"workload {workload.name}: size {fio.size} differs from the fio file of backend "
                f"{self.name} (fio_size {self.fio_size}); leave size out, or make it fio_size"
            )
        return None

    def run_vars(self, workload: Workload, variables: dict[str, Any]) -> dict[str, Any]:
        if workload.tool == "fio" and not self.scratch:
            variables = {**variables, "bench_fio_size": self.fio_size or 0}
        return variables
