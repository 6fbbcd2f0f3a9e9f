"""What every backend kind has: where workloads find it, its storage role and the role's variables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from iolab import faults
from iolab.schema import CephPath, Model, Name
from iolab.shared.confine import MOUNT_ROOT

DATASET_DIR = "dataset"  # each host's data set: <target>/iolab-<inventory_hostname>/dataset

if TYPE_CHECKING:
    from iolab.schema import Dataset


class Workload(Protocol):
    """What a backend asks of a workload (iolab.workloads.base.Workload has it all): backends import no workload
    kind, and a new kind needs nothing of them."""

    @property
    def name(self) -> str: ...

    @property
    def tool(self) -> str: ...

    def too_big(self, where: str, size: int) -> str | None: ...

    @property
    def needs_s3(self) -> bool: ...

    @property
    def writes(self) -> str: ...


class FioWorkload(Workload, Protocol):
    """An fio workload as the block backends read it, once its `tool` said fio (iolab.kinds.fio.workload)."""

    @property
    def jobfile(self) -> str | None: ...

    @property
    def size(self) -> int | None: ...


def host_root(target: str, host: str) -> str:
    """Where a host's own copy of the data set lives on a target (what the dataset_gen role computes)."""
    return f"{target}/iolab-{host}/{DATASET_DIR}"


class Backend(Model):
    """What every backend has: where workloads find it on a host (`target`), its role and the role's variables."""

    if TYPE_CHECKING:  # every kind declares them, with its own type's literal
        name: str
        type: str

    # The storage role stages the campaign's data set itself (s3): no dataset phase (iolab.drive.datasets).
    stages_dataset: ClassVar[bool] = False
    # The faults a workload on it may inject (iolab.faults): on the client and a command, everywhere; each kind
    # of storage adds its own servers'.
    fault_kinds: ClassVar[tuple[str, ...]] = faults.EVERYWHERE

    @property
    def role(self) -> str:
        return f"storage_{self.type}"  # one role per backend type: roles/storage_<type>

    @property
    def target(self) -> str:
        return getattr(self, "mountpoint", None) or f"{MOUNT_ROOT}/{self.name}"

    def places(self) -> list[tuple[str, str, bool]]:
        """(field, path, holds data) for each host directory the backend mounts on or writes into, which the
        campaign checks against the system's own (iolab.shared.confine.refusal). `holds data`: a directory in
        use already, where benchmarks write only into their iolab-<host> subdirectory, not a mount point."""
        return [("mountpoint", self.target, False)]

    @property
    def writable(self) -> bool:
        """Whether workloads may write there (data set mounts are read-only)."""
        return not getattr(self, "readonly", False)

    @property
    def shared_dataset_root(self) -> str:
        """'' where each host has its own copy of the data set (a writable backend; s3's staging copies);
        `<target>/dataset` on a read-only backend (one copy for all)."""
        return "" if self.writable or self.stages_dataset else f"{self.target}/{DATASET_DIR}"

    def role_vars(self, state: str, dataset: Dataset | None = None, formats: Sequence[str] = ()) -> dict[str, Any]:
        """The storage role's variables: its state (mounted, kept, unmounted, absent) and the backend's fields."""
        fields = self.model_dump(exclude={"type"}, exclude_none=True)
        if "mountpoint" in type(self).model_fields:
            fields["mountpoint"] = self.target
        return {f"{self.role}_state": state, **{f"{self.role}_{k}": v for k, v in fields.items()}}

    def supports(self, workload: Workload) -> bool:
        """Whether `workload` is of this backend's kind: S3 workloads on s3 backends, file workloads on the others.

        A campaign runs each workload on the backends that support it (iolab.campaign.model.expand).
        """
        return workload.needs_s3 == (self.type == "s3")

    def refuse(self, workload: Workload) -> str | None:
        """Why `workload` cannot run on this backend (a campaign error), or None."""
        if not self.writable and workload.writes:
            return (
                f"workload {workload.name} writes ({workload.writes}) but backend {self.name} is mounted "
                "read-only to keep its data set safe; run write benchmarks on a scratch backend "
                "(tmpfs, local, or a mount without readonly)"
            )
        return None

    def run_vars(self, workload: Workload, variables: dict[str, Any]) -> dict[str, Any]:
        """A run's role variables, adjusted to this backend (a read-only fio file, an fio engine)."""
        return variables

    def dataset_note(self) -> str | None:
        """How this backend's hosts get the campaign's data set where it is not the common way (--dry-run says it)."""
        return None

    def storage_side(self) -> dict[str, Any]:
        """What a run's hosts get of the storage's own side (playbooks/run.yml's `run_ceph`): nothing, but where
        iolab reaches the storage's servers (CephBackend)."""
        return {}


# What the lab's services publish (`invoke lab.services-up`; <dir>/client.json of roles
# service_ceph and service_nfs): a Ceph backend that names no cluster uses the lab's.
LAB_CEPH_DIR = "/var/lib/iolab/ceph"
LAB_CEPH = {
    "ceph_conf": f"{LAB_CEPH_DIR}/ceph.conf",
    "keyring": f"{LAB_CEPH_DIR}/ceph.client.admin.keyring",
    "client": "admin",
    "pool": "iolab",
    "fs_name": "iolab",
}


class CephBackend(Backend):
    """A backend on a Ceph cluster (rbd, rbd_snapshot, cephfs): how clients reach the cluster (the lab's by default),
    and the storage side a run gets: iolab.host.ceph_osds drops the OSDs' (and the MDS's) caches before it and
    samples their counters while it runs."""

    fault_kinds: ClassVar[tuple[str, ...]] = (*faults.EVERYWHERE, *faults.CEPH_KINDS)
    ceph_conf: CephPath = LAB_CEPH["ceph_conf"]
    keyring: CephPath = LAB_CEPH["keyring"]
    client: Name = LAB_CEPH["client"]

    def storage_side(self) -> dict[str, Any]:
        cluster = {"conf": self.ceph_conf, "keyring": self.keyring, "client": self.client}
        return {"run_ceph": {**cluster, "mds": self.type == "cephfs"}}  # iolab.host.ceph_osds.Cluster
