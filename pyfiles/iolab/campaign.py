"""Campaign files: loaded once into typed objects, expanded into runs.

A campaign names what to compare (docs/DESIGN.md). Workload parameters given as a
list sweep (cartesian product); every (backend, workload parameters,
repetition) becomes a `Run` whose id is a hash of its full configuration, so
the same file always yields the same run ids and a resumed campaign skips what
is already stored.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from iolab import fio_jobfile, fio_jobs, yamlfile
from iolab.confine import MOUNT_ROOT, refusal
from iolab.errors import UserError
from iolab.units import parse_duration, parse_size

# What a campaign may ask for before it is refused as a mistake (bench.all --max-runs raises MAX_RUNS).
MAX_RUNS = 10_000
MAX_WORKLOADS = 1_000
MAX_BACKENDS = 100


def _name(value: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", value):
        raise ValueError(
            f"{value!r} is not a valid name: use letters, digits, '.', '_' and '-' "
            "(names become directory and mount names)"
        )
    return value


def _absolute(value: str) -> str:
    if not value.startswith("/") or "\n" in value or "/../" in value + "/":
        raise ValueError(f"{value!r} must be an absolute path without '..'")
    if ":" in value:
        raise ValueError(f"{value!r}: paths may not contain ':' (fio reads it as a file name separator)")
    return value.rstrip("/") or "/"


def _ramp(value: object) -> float:
    return 0.0 if value in (0, "0", "0s") else parse_duration(value)  # no ramp is a valid choice


Name = Annotated[str, AfterValidator(_name)]
Size = Annotated[int, BeforeValidator(parse_size)]
Duration = Annotated[float, BeforeValidator(parse_duration)]
AbsPath = Annotated[str, AfterValidator(_absolute)]
Ramp = Annotated[float, BeforeValidator(_ramp)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Backend(_Model):
    """What every backend has: where workloads find it on a host (`target`), its role and the role's variables."""

    @property
    def role(self) -> str:
        return f"storage_{self.type}"  # one role per backend type: roles/storage_<type>

    @property
    def target(self) -> str:
        return getattr(self, "mountpoint", None) or f"{MOUNT_ROOT}/{self.name}"

    @property
    def writable(self) -> bool:
        """Whether workloads may write there (data set mounts are read-only)."""
        return not getattr(self, "readonly", False)

    def role_vars(self, state: str, dataset: Dataset | None = None, formats: Sequence[str] = ()) -> dict[str, Any]:
        """The storage role's variables: its state (mounted, kept, unmounted, absent) and the backend's fields."""
        fields = self.model_dump(exclude={"type"}, exclude_none=True)
        if "mountpoint" in type(self).model_fields:
            fields["mountpoint"] = self.target
        return {f"{self.role}_state": state, **{f"{self.role}_{k}": v for k, v in fields.items()}}

    def refuse(self, workload: Any) -> str | None:
        """Why `workload` cannot run on this backend (a campaign error), or None."""
        if not self.writable and getattr(workload, "writes", False):
            return (
                f"workload {workload.name} writes ({workload.writes}) but backend {self.name} is mounted "
                "read-only to keep its data set safe; run write benchmarks on a scratch backend "
                "(tmpfs, local, or a mount without readonly)"
            )
        return None

    def run_vars(self, workload: Any, variables: dict[str, Any]) -> dict[str, Any]:
        """A run's role variables, adjusted to this backend (a read-only fio file, an fio engine)."""
        return variables


class TmpfsBackend(_Backend):
    """A tmpfs of `size` mounted on each host (memory: the ceiling of a host's own storage)."""

    name: Name
    type: Literal["tmpfs"]
    size: Size
    mountpoint: AbsPath | None = None


def _device(value: str) -> str:
    if not value.startswith("/dev/"):
        raise ValueError(f"{value!r} is not a device (allow_devices names block or character devices in /dev)")
    return value


# Devices a user's fio job file may name (fio_jobfile.check), on scratch backends only.
Device = Annotated[str, AfterValidator(_absolute), AfterValidator(_device)]


class LocalBackend(_Backend):
    """A directory on a file system the host already has (local NVMe, an existing mount)."""

    name: Name
    type: Literal["local"]
    path: AbsPath
    allow_devices: list[Device] = []

    @property
    def target(self) -> str:
        return self.path


# --- shared and network storage (issue 4) --------------------------------------------------------

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


def _mount_option(value: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.=/+@:-]*", value):
        raise ValueError(
            f"mount option {value!r}: give one option per list item (no commas or blanks), "
            "e.g. [noatime, rsize=1048576]"
        )
    return value


def _no_blank(value: str) -> str:
    if any(c.isspace() for c in value):
        raise ValueError(f"{value!r} may not contain blanks (Ceph reads it from CEPH_ARGS)")
    return value


def _host_name(value: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}", value):
        raise ValueError(f"{value!r} is not a host name or address")
    return value


def _fs_path(value: str) -> str:
    if not value.startswith("/") or "\n" in value or "," in value or "/../" in value + "/":
        raise ValueError(f"{value!r} must be an absolute path inside the file system, without '..' or ','")
    return value.rstrip("/") or "/"


def _source(value: str) -> str:
    if not value or value.startswith("-") or any(c in value for c in "\n\r\0"):
        raise ValueError(f"{value!r} is not a mount source (e.g. nas01:/export, /dev/sdb1, an image file)")
    return value


def _fstype(value: str) -> str:
    import re

    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", value):
        raise ValueError(f"{value!r} is not a file system type (e.g. nfs, lustre, beegfs, fuse.curvefs)")
    return value


def _nfs_version(value: object) -> str:
    return str(value)


MountOption = Annotated[str, AfterValidator(_mount_option)]
CephPath = Annotated[str, AfterValidator(_absolute), AfterValidator(_no_blank)]
HostName = Annotated[str, AfterValidator(_host_name)]
FsPath = Annotated[str, AfterValidator(_fs_path)]


class RbdSnapshotBackend(_Backend):
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
    ceph_conf: CephPath = LAB_CEPH["ceph_conf"]
    keyring: CephPath = LAB_CEPH["keyring"]
    client: Name = LAB_CEPH["client"]
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

    def refuse(self, workload: Any) -> str | None:
        reason = super().refuse(workload)
        if reason or getattr(workload, "tool", "") != "fio":
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

    def run_vars(self, workload: Any, variables: dict[str, Any]) -> dict[str, Any]:
        if workload.tool == "fio":
            variables = {**variables, "bench_fio_size": self.fio_size or 0}
        return variables


class CephfsBackend(_Backend):
    """A CephFS directory (`path` inside file system `fs_name`): kernel client where present, else ceph-fuse."""

    name: Name
    type: Literal["cephfs"]
    path: FsPath = "/"
    fs_name: Name = LAB_CEPH["fs_name"]
    ceph_conf: CephPath = LAB_CEPH["ceph_conf"]
    keyring: CephPath = LAB_CEPH["keyring"]
    client: Name = LAB_CEPH["client"]
    readonly: bool = False
    method: Literal["auto", "kernel", "fuse"] = "auto"
    options: list[MountOption] = []
    mountpoint: AbsPath | None = None


class NfsBackend(_Backend):
    """An NFS export (kernel client; checked first with libnfs's nfs-ls, which needs no kernel support)."""

    name: Name
    type: Literal["nfs"]
    server: HostName
    export: FsPath
    version: Annotated[Literal["3", "4", "4.0", "4.1", "4.2"], BeforeValidator(_nfs_version)] = "4.1"
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    mount_port: Annotated[int, Field(ge=1, le=65535)] | None = None
    options: list[MountOption] = []
    readonly: bool = False
    mountpoint: AbsPath | None = None


class SshfsBackend(_Backend):
    """A directory of another lab host (`host`, an inventory host) mounted over SSH with sshfs (FUSE)."""

    name: Name
    type: Literal["sshfs"]
    host: HostName
    path: AbsPath
    readonly: bool = False
    options: list[MountOption] = []
    mountpoint: AbsPath | None = None


class MountBackend(_Backend):
    """Any file system the host can mount, named by source, type and options (a vendor NAS, Lustre, BeeGFS, CurveFS)."""

    name: Name
    type: Literal["mount"]
    source: Annotated[str, AfterValidator(_source)]
    fstype: Annotated[str, AfterValidator(_fstype)]
    options: list[MountOption] = []
    readonly: bool = False
    mountpoint: AbsPath | None = None
    allow_devices: list[Device] = []

    @model_validator(mode="after")
    def _devices_on_scratch(self) -> MountBackend:
        if self.readonly and self.allow_devices:
            raise ValueError(
                "allow_devices lets fio job files write to those devices; a readonly backend "
                "cannot have them: drop readonly or allow_devices"
            )
        return self


class RbdBackend(_Backend):
    """An RBD image read and written by fio's rbd engine through librbd: Ceph's block baseline, no file system.

    The image is created and written in full once (prefill): reads of never-written
    extents return zeros without reaching the OSDs and would measure nothing.
    """

    name: Name
    type: Literal["rbd"]
    pool: Name = LAB_CEPH["pool"]
    image: Name | None = None  # default: iolab-<name>
    size: Size = 1 << 30
    prefill: bool = True
    ceph_conf: CephPath = LAB_CEPH["ceph_conf"]
    keyring: CephPath = LAB_CEPH["keyring"]
    client: Name = LAB_CEPH["client"]
    mountpoint: AbsPath | None = None  # nothing is mounted: fio's work directory on each host

    @property
    def image_name(self) -> str:
        return self.image or f"iolab-{self.name}"

    def role_vars(self, state: str, dataset: Dataset | None = None, formats: Sequence[str] = ()) -> dict[str, Any]:
        return {**super().role_vars(state), "storage_rbd_image": self.image_name}

    def refuse(self, workload: Any) -> str | None:
        if getattr(workload, "tool", "") != "fio":
            return (
                f"workload {workload.name} reads files but backend {self.name} is a raw RBD image read "
                "by fio's rbd engine; use an rbd_snapshot or cephfs backend for it"
            )
        if workload.jobfile:
            return (
                f"workload {workload.name}: backend {self.name} runs fio's built-in profiles with the "
                "rbd engine; a job file cannot be rewritten for it"
            )
        if workload.size and workload.size > self.size:
            return f"workload {workload.name}: size {workload.size} exceeds the image ({self.size} bytes)"
        return None

    def run_vars(self, workload: Any, variables: dict[str, Any]) -> dict[str, Any]:
        options = {**variables["bench_fio_options"], **fio_jobs.rbd_options(self.pool, self.image_name, self.client)}
        # librados finds the cluster through CEPH_CONF and the key through CEPH_ARGS.
        return {
            **variables,
            "bench_fio_options": options,
            "bench_fio_size": workload.size or self.size,
            "run_environment": {"CEPH_CONF": self.ceph_conf, "CEPH_ARGS": f"--keyring {self.keyring}"},
        }


Backend = Annotated[
    TmpfsBackend
    | LocalBackend
    | RbdSnapshotBackend
    | CephfsBackend
    | NfsBackend
    | SshfsBackend
    | MountBackend
    | RbdBackend,
    Field(discriminator="type"),
]
BACKEND_TYPES = {
    "tmpfs": TmpfsBackend,
    "local": LocalBackend,
    "rbd_snapshot": RbdSnapshotBackend,
    "cephfs": CephfsBackend,
    "nfs": NfsBackend,
    "sshfs": SshfsBackend,
    "mount": MountBackend,
    "rbd": RbdBackend,
}


class _Workload(_Model):
    """What every workload has: a name, what the page cache holds when it starts, a time limit, profilers.

    cache: drop (the default: sync and drop caches before every run, on every host),
    keep (leave them as the run before left them), or warm (each run twice: cold,
    after a drop, then warm, after a warm-up — `warm_command` on each host, or a pass
    of the workload itself — so reports show cold and warm side by side).
    """

    name: Name
    cache: Literal["drop", "keep", "warm"] = "drop"
    warm_command: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = None
    warmup: bool = False  # one unrecorded run before a point's first measured one, per mount
    allow_caching: bool = False  # potential_caching becomes `overridden`: kept, but the sample stays valid
    timeout: Duration | None = None  # per run: the tool is stopped and the run recorded as failed after it
    # Sampling profilers while the tool runs, kept under raw/: perf (system-wide, with call
    # graphs: the kernel's storage stack too) and py-spy (the Python tool and its workers).
    profilers: list[Literal["perf", "py-spy"]] = []

    @model_validator(mode="after")
    def _consistent_policies(self) -> _Workload:
        if self.warm_command and self.cache != "warm":
            raise ValueError("warm_command is the warm-up of cache: warm; set cache: warm or drop warm_command")
        if "py-spy" in self.profilers and self.tool == "fio":
            raise ValueError("py-spy samples Python programs; fio is not one: use profilers: [perf]")
        return self

    def run_timeout(self, default: float) -> float:
        return self.timeout or default


class FioWorkload(_Workload):
    """fio with a built-in profile or the user's own job file."""

    type: Literal["fio"]
    profile: str | None = None
    jobfile: str | None = None
    # The job file as checked (fio_jobfile: includes inlined), set by _resolve_jobfiles; hosts get this text.
    jobtext: Annotated[str | None, Field(exclude=True)] = None
    runtime: Duration = 10.0
    ramp: Ramp = 2.0
    size: Size | None = None  # per host; default: what fits the backend, up to 1 GiB
    iodepth: Annotated[int, Field(ge=1, le=4096)] | None = None
    numjobs: Annotated[int, Field(ge=1, le=256)] = 1
    ioengine: Literal["libaio", "io_uring", "psync", "sync", "posixaio"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _not_jobtext(cls, data: Any) -> Any:
        if isinstance(data, dict) and "jobtext" in data:
            raise ValueError("jobtext is iolab's checked copy of jobfile; give jobfile: PATH")
        return data

    @model_validator(mode="after")
    def _one_source(self) -> FioWorkload:
        if (self.profile is None) == (self.jobfile is None):
            raise ValueError(
                "give either profile (one of: "
                + ", ".join(fio_jobs.PROFILES)
                + ") or jobfile: PATH, not both or neither"
            )
        if self.profile is not None and self.profile not in fio_jobs.PROFILES:
            raise ValueError(
                f"unknown fio profile {self.profile!r} (expected one of: "
                + ", ".join(fio_jobs.PROFILES)
                + ", or jobfile: PATH)"
            )
        return self

    tool: ClassVar[str] = "fio"  # names the role (bench_fio) and the parser (parsers/fio.py)

    @property
    def uses_dataset(self) -> bool:
        return self.profile == fio_jobs.BSSPLIT_FROM_DATASET

    @property
    def writes(self) -> str:
        """What makes the job write to the target ('' when it only reads)."""
        if self.jobtext:
            option = fio_jobfile.writes(fio_jobfile.parse_text(self.jobtext, "jobtext"))
            return f"job file {self.jobfile}, {option}" if option else ""
        rw = fio_jobs.PROFILES[self.profile].get("rw", "read") if self.profile else "read"
        return f"profile {self.profile}, rw={rw}" if rw not in ("read", "randread") else ""

    def role_vars(self, target: str) -> dict[str, Any]:
        """The bench_fio role's variables for a run of this workload on `target`."""
        options: dict[str, Any] = {"time_based": "1", "runtime": f"{self.runtime:g}", "ramp_time": f"{self.ramp:g}"}
        options.update(
            {k: getattr(self, k) for k in ("iodepth", "numjobs", "ioengine") if getattr(self, k) is not None}
        )
        if self.profile:
            options = fio_jobs.profile_options(self.profile, options)
        devices = fio_jobfile.devices(fio_jobfile.parse_text(self.jobtext, "jobtext")) if self.jobtext else []
        return {
            "bench_fio_options": options,
            "bench_fio_jobtext": self.jobtext or "",
            "bench_fio_allow_devices": devices,
            "bench_fio_size": self.size or 0,
            "bench_fio_target": target,
            "bench_fio_timeout": self.run_timeout(self.runtime + self.ramp + 120),
            "bench_fio_telemetry_after": self.ramp,
            # Relative to the host's work directory, <target>/iolab-<host>: its data set.
            "bench_fio_bssplit_from": DATASET_DIR if self.uses_dataset else "",
        }

    def dataset_vars(self, root: str) -> dict[str, Any]:
        """Where the data set is when every host reads one copy at `root` ('' : each host its own)."""
        return {"bench_fio_bssplit_from": root or DATASET_DIR} if self.uses_dataset else {}


# --- data sets and deep-learning workloads (issue 5) -------------------------------------------

DATASET_DIR = "dataset"  # each host's data set: <target>/iolab-<inventory_hostname>/dataset
# resnet50 compute time per batch of 400 samples (MLPerf Storage v1.0, as DLIO runs it;
# docs/REFERENCE_FIGURES.md): the defaults of the emulated accelerators.
ACCELERATOR_FIGURES = {"a100": 0.435, "h100": 0.224}
REFERENCE_BATCH = 400
LOADER_TIMEOUT = 1800.0  # seconds a loader or metadata run may take unless the campaign says otherwise


class Dataset(_Model):
    """The generated data set every host gets on every backend (iolab.dataset), packed as workloads need."""

    kind: Literal["imagenet-like"] = "imagenet-like"
    files: Annotated[int, Field(ge=1, le=100_000_000)]
    seed: int = 1
    classes: Annotated[int, Field(ge=1, le=1_000_000)] = 100
    formats: list[Literal["packed", "wds", "tfrecord"]] = []

    def identity(self) -> dict[str, Any]:
        """What decides the data set's bytes (formats only add packed copies of them)."""
        return self.model_dump(exclude={"formats"})


class Accelerator(_Model):
    """Emulated (a100, h100: resnet50's figures; custom: your compute_per_batch) or the host's real GPUs (gpu)."""

    type: Literal["a100", "h100", "custom", "gpu"]
    compute_per_batch: Duration | None = None

    @model_validator(mode="after")
    def _compute(self) -> Accelerator:
        if self.type == "custom" and self.compute_per_batch is None:
            raise ValueError("type custom needs compute_per_batch, e.g. 0.224s")
        if self.type == "gpu" and self.compute_per_batch is not None:
            raise ValueError("type gpu trains ResNet-50 for real: it takes no compute_per_batch")
        return self

    def compute_time(self, batch_size: int) -> float:
        """Seconds per batch: compute_per_batch as given, else the figure for 400 scaled to batch_size."""
        if self.compute_per_batch is not None:
            return self.compute_per_batch
        return ACCELERATOR_FIGURES.get(self.type, 0.0) * batch_size / REFERENCE_BATCH


class PytorchWorkload(_Workload):
    """A PyTorch DataLoader over the data set, optionally feeding emulated or real accelerators."""

    type: Literal["pytorch"]
    reader: Literal["pil", "cv2-imread", "cv2-imdecode", "packed", "dali"] = "packed"
    workers: Annotated[int, Field(ge=0, le=256)] = 2
    batch_size: Annotated[int, Field(ge=1, le=65536)] = 64
    pin_memory: bool = False
    prefetch_factor: Annotated[int, Field(ge=1, le=64)] = 2
    decode: bool = True
    shuffle: bool = True
    epochs: Annotated[int, Field(ge=1, le=1000)] = 1
    steps: Annotated[int, Field(ge=2)] | None = None  # batches per epoch and accelerator, at most
    syscall_profile: bool = False
    preprocess_time: Ramp = 0.0  # slept per sample after reading (DLIO's)
    accelerator: Accelerator | None = None
    accelerators: Annotated[int, Field(ge=1, le=256)] = 1  # per host: one rank process each
    distributed: bool = False
    seed: int = 0
    # search: accelerators finds the most accelerators per host, up to `accelerators`, that hold AU ≥ 90%
    # (iolab.accelerators); one search per backend, whatever the campaign's repetitions.
    search: Literal["accelerators"] | None = None

    tool: ClassVar[str] = "pytorch"
    uses_dataset: ClassVar[bool] = True

    @model_validator(mode="after")
    def _consistent(self) -> PytorchWorkload:
        if self.reader == "cv2-imread" and not self.decode:
            raise ValueError(
                "reader cv2-imread always decodes: use decode: true, or cv2-imdecode or packed for bytes only"
            )
        if self.accelerator and self.accelerator.type == "gpu" and not self.decode:
            raise ValueError("accelerator gpu trains on images: it needs decode: true")
        if self.search and self.accelerator is None:
            raise ValueError(
                "search: accelerators searches how many accelerators the backend feeds: "
                "add accelerator: {type: h100} (or a100, custom)"
            )
        return self

    @property
    def formats(self) -> set[str]:
        return {"packed"} if self.reader == "packed" else set()

    def role_vars(self, target: str) -> dict[str, Any]:
        kind = "none" if self.accelerator is None else "gpu" if self.accelerator.type == "gpu" else "emulated"
        compute = self.accelerator.compute_time(self.batch_size) if kind == "emulated" else 0.0
        return {
            "bench_pytorch_target": target,
            "bench_pytorch_reader": self.reader,
            "bench_pytorch_workers": self.workers,
            "bench_pytorch_batch_size": self.batch_size,
            "bench_pytorch_pin_memory": self.pin_memory,
            "bench_pytorch_prefetch_factor": self.prefetch_factor,
            "bench_pytorch_decode": self.decode,
            "bench_pytorch_shuffle": self.shuffle,
            "bench_pytorch_epochs": self.epochs,
            "bench_pytorch_steps": self.steps or 0,
            "bench_pytorch_syscall_profile": self.syscall_profile,
            "bench_pytorch_preprocess_time": self.preprocess_time,
            "bench_pytorch_accelerator": kind,
            "bench_pytorch_compute_per_batch": compute,
            "bench_pytorch_accelerators": self.accelerators,
            "bench_pytorch_distributed": self.distributed,
            "bench_pytorch_seed": self.seed,
            "bench_pytorch_timeout": self.run_timeout(LOADER_TIMEOUT),
        }

    def dataset_vars(self, root: str) -> dict[str, Any]:
        return {"bench_pytorch_dataset": root}

    def describe(self) -> str:
        what = {"none": "no accelerator", "gpu": "ResNet-50 training on the host's GPUs"}
        kind = "none" if self.accelerator is None else self.accelerator.type
        acc = (
            what.get(kind)
            or f"{self.accelerators} emulated {kind} ({self.accelerator.compute_time(self.batch_size):g} s per batch)"
        )
        if self.search:
            acc = f"the most emulated {kind} per host at AU ≥ 90 %, up to {self.accelerators}"
        return (
            f"PyTorch DataLoader, reader {self.reader}, {self.workers} workers, batch {self.batch_size}, "
            f"decode {'on' if self.decode else 'off'}, {self.epochs} epoch(s), {acc}"
            + (", one job over all hosts" if self.distributed else "")
            + (", under strace -c" if self.syscall_profile else "")
        )


class MetadataWorkload(_Workload):
    """readdir, stat and open/close rates over the data set's tree (the small-file metadata bottleneck)."""

    type: Literal["metadata"]
    threads: Annotated[int, Field(ge=1, le=1024)] = 1
    limit: Annotated[int, Field(ge=1)] | None = None  # files per operation, at most (default: all)
    drop_caches: bool = True  # before each operation, not only before the run

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


class TensorflowWorkload(_Workload):
    """tf.data over the data set's TFRecord shards (interleave, map, prefetch), optionally feeding emulated accelerators."""

    type: Literal["tensorflow"]
    batch_size: Annotated[int, Field(ge=1, le=65536)] = 64
    private_threads: Annotated[int, Field(ge=0, le=1024)] = 0  # tf.data private thread pool; 0: shared pool
    parallel_reads: Annotated[int, Field(ge=0, le=1024)] = 0  # shards interleaved at once; 0: up to 16
    shuffle_buffer: Annotated[int, Field(ge=1)] = 1024
    decode: bool = True
    shuffle: bool = True
    epochs: Annotated[int, Field(ge=1, le=1000)] = 1
    steps: Annotated[int, Field(ge=2)] | None = None
    syscall_profile: bool = False
    accelerator: Accelerator | None = None
    accelerators: Annotated[int, Field(ge=1, le=256)] = 1
    seed: int = 0

    tool: ClassVar[str] = "tensorflow"
    uses_dataset: ClassVar[bool] = True
    formats: ClassVar[set[str]] = {"tfrecord"}

    @model_validator(mode="after")
    def _emulated_only(self) -> TensorflowWorkload:
        if self.accelerator and self.accelerator.type == "gpu":
            raise ValueError(
                "accelerator gpu (real ResNet-50 training) is a pytorch workload's; "
                "tensorflow emulates accelerators only (a100, h100, custom)"
            )
        return self

    def role_vars(self, target: str) -> dict[str, Any]:
        compute = self.accelerator.compute_time(self.batch_size) if self.accelerator else 0.0
        return {
            "bench_tensorflow_target": target,
            "bench_tensorflow_batch_size": self.batch_size,
            "bench_tensorflow_private_threads": self.private_threads,
            "bench_tensorflow_parallel_reads": self.parallel_reads,
            "bench_tensorflow_shuffle_buffer": self.shuffle_buffer,
            "bench_tensorflow_decode": self.decode,
            "bench_tensorflow_shuffle": self.shuffle,
            "bench_tensorflow_epochs": self.epochs,
            "bench_tensorflow_steps": self.steps or 0,
            "bench_tensorflow_seed": self.seed,
            "bench_tensorflow_syscall_profile": self.syscall_profile,
            "bench_tensorflow_accelerator": "emulated" if self.accelerator else "none",
            "bench_tensorflow_compute_per_batch": compute,
            "bench_tensorflow_accelerators": self.accelerators,
            "bench_tensorflow_timeout": self.run_timeout(LOADER_TIMEOUT),
        }

    def dataset_vars(self, root: str) -> dict[str, Any]:
        return {"bench_tensorflow_dataset": root}

    def describe(self) -> str:
        acc = (
            f"{self.accelerators} emulated {self.accelerator.type} "
            f"({self.accelerator.compute_time(self.batch_size):g} s per batch)"
            if self.accelerator
            else "no accelerator"
        )
        return (
            f"tf.data on the TFRecord shards, batch {self.batch_size}, private threads "
            f"{self.private_threads or 'shared pool'}, decode {'on' if self.decode else 'off'}, "
            f"{self.epochs} epoch(s), {acc}" + (", under strace -c" if self.syscall_profile else "")
        )


# MLPerf Storage v2's checkpointing models: the whole checkpoint (model and optimizer state) and the
# processes a CLOSED submission writes it with (docs/REFERENCE_FIGURES.md, "Checkpointing").
CHECKPOINT_MODELS = {
    "llama3-8b": (105e9, 8),
    "llama3-70b": (912e9, 64),
    "llama3-405b": (5.29e12, 512),
    "llama3-1t": (18e12, 1024),
}


class CheckpointWorkload(_Workload):
    """MLPerf Storage's checkpointing: each rank writes its shard (fsync), caches dropped, each rank reads it back.

    `scale` shrinks the model's checkpoint to what a lab holds (llama3-8b at 0.01 is 1.05 GB);
    the checkpoint is shared by every rank of every host: `writers` processes per host.
    """

    type: Literal["checkpoint"]
    model: Literal["llama3-8b", "llama3-70b", "llama3-405b", "llama3-1t"] = "llama3-8b"
    scale: Annotated[float, Field(gt=0, le=1)] = 1.0
    writers: Annotated[int, Field(ge=1, le=1024)] = 8

    tool: ClassVar[str] = "checkpoint"
    uses_dataset: ClassVar[bool] = False
    formats: ClassVar[set[str]] = set()

    @model_validator(mode="after")
    def _at_least_a_mebibyte(self) -> CheckpointWorkload:
        if self.bytes < self.writers << 20:
            raise ValueError(
                f"scale {self.scale:g} leaves {self.bytes} bytes of {self.model}'s checkpoint, less "
                f"than 1 MiB for each of the {self.writers} writers; raise scale"
            )
        return self

    @property
    def bytes(self) -> int:
        """The whole checkpoint's size at this scale (MLPerf's size times `scale`)."""
        return int(CHECKPOINT_MODELS[self.model][0] * self.scale)

    @property
    def writes(self) -> str:
        return f"checkpoint {self.model}"

    def role_vars(self, target: str) -> dict[str, Any]:
        return {
            "bench_checkpoint_target": target,
            "bench_checkpoint_bytes": self.bytes,
            "bench_checkpoint_writers": self.writers,
            "bench_checkpoint_timeout": self.run_timeout(LOADER_TIMEOUT),
        }

    def describe(self) -> str:
        size, processes = CHECKPOINT_MODELS[self.model]
        return (
            f"checkpoint of {self.model} at scale {self.scale:g} ({self.bytes / 1e9:.3g} GB of {size / 1e9:.4g} GB; "
            f"MLPerf writes it with {processes} processes), {self.writers} writers per host: write + fsync, "
            "caches dropped on every host, read back"
        )


Workload = Annotated[
    FioWorkload | PytorchWorkload | MetadataWorkload | TensorflowWorkload | CheckpointWorkload,
    Field(discriminator="type"),
]
WORKLOAD_TYPES = {
    "fio": FioWorkload,
    "pytorch": PytorchWorkload,
    "metadata": MetadataWorkload,
    "tensorflow": TensorflowWorkload,
    "checkpoint": CheckpointWorkload,
}


class Campaign(_Model):
    name: Name
    description: str = ""
    repetitions: Annotated[int, Field(ge=1, le=100)] = 1
    # Repeats that disagree (figures of merit more than 5% apart) get more runs, up to this many in all.
    max_repetitions: Annotated[int, Field(ge=1, le=100)] | None = None
    # as-written, or random: each backend's runs shuffled (seeded: the same order every time), so a
    # drift over the campaign (a filling cache tier, a neighbour's load) spreads over every setting.
    order: Literal["as-written", "random"] = "as-written"
    order_seed: int = 0
    # Where backends without a mountpoint of their own are mounted: <mount_root>/<backend name>.
    mount_root: AbsPath = MOUNT_ROOT
    # Defaults for every workload that does not set its own (see _Workload).
    cache: Literal["drop", "keep", "warm"] | None = None
    warm_command: list[str] | None = None
    warmup: bool | None = None
    allow_caching: bool | None = None
    timeout: Duration | None = None
    # Client-count sweep: each run also on the first 1, 2, 4 … selected hosts, to find saturation.
    hosts_sweep: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1)] | None = None
    # A host unreachable at the start: leave it out (skip) or stop the campaign (abort).
    on_host_failure: Literal["skip", "abort"] = "skip"
    backends: Annotated[list[Backend], Field(min_length=1)]
    dataset: Dataset | None = None
    workloads: Annotated[list[Workload], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_names(self) -> Campaign:
        if self.max_repetitions is not None and self.max_repetitions < self.repetitions:
            raise ValueError(
                f"max_repetitions ({self.max_repetitions}) is below repetitions ({self.repetitions}): "
                "it caps the repetitions run when repeats disagree"
            )
        _unique("backend", [b.name for b in self.backends])
        root_refused = refusal(self.mount_root, "mount_root")
        if root_refused:
            raise ValueError(root_refused)
        for index, backend in enumerate(self.backends):
            existing = isinstance(backend, LocalBackend)
            where = f"backends[{index}].{'path' if existing else 'mountpoint'}"
            reason = refusal(backend.target, where, self.mount_root, existing)
            if reason:
                raise ValueError(reason)
        # A swept workload is several points of one name; two identical points are a mistake.
        _unique("workload", [w.model_dump_json() for w in self.workloads])
        refused = [reason for b in self.backends for w in self.workloads if (reason := b.refuse(w))]
        if refused:
            raise ValueError(refused[0])
        readers = sorted({w.name for w in self.workloads if w.uses_dataset})
        if readers and self.dataset is None:
            raise ValueError(
                f"workload(s) {', '.join(readers)} read the data set: add "
                "dataset: {kind: imagenet-like, files: N, seed: S}"
            )
        return self

    @property
    def needs_dl(self) -> bool:
        """The hosts need the deep-learning stack (data set generation, loaders)."""
        return self.dataset is not None or any(w.tool in ("pytorch", "tensorflow") for w in self.workloads)

    @property
    def needs_tf(self) -> bool:
        return any(w.tool == "tensorflow" for w in self.workloads)

    def setup_vars(self) -> dict[str, Any]:
        """What the setup phase installs on the hosts for this campaign (role iolab_host)."""
        profilers = sorted({p for w in self.workloads for p in w.profilers})
        return {"iolab_host_dl": self.needs_dl, "iolab_host_tf": self.needs_tf, "iolab_host_profilers": profilers}

    @property
    def dataset_formats(self) -> list[str]:
        """Packed copies to make: the campaign's own list and what its workloads read."""
        wanted = set(self.dataset.formats) if self.dataset else set()
        for workload in self.workloads:
            wanted |= getattr(workload, "formats", set())
        return sorted(wanted)


def _unique(kind: str, names: list[str]) -> None:
    doubles = sorted({n for n in names if names.count(n) > 1})
    if doubles:
        raise ValueError(f"{kind} names must be unique; repeated: {', '.join(doubles)}")


# The workload keys a campaign may set for all its workloads.
WORKLOAD_DEFAULTS = ("cache", "warm_command", "warmup", "allow_caching", "timeout")
# What a run's samples say of the page cache it started with (params.cache).
CACHE_STATES = {"drop": "cold", "keep": "kept"}


class Run(_Model):
    """One execution: a backend, one point of a workload's sweep, one repetition (on `hosts` hosts)."""

    run_id: str
    campaign: str
    backend: Backend
    workload: Workload
    repetition: int
    hosts: int | None = None  # a hosts_sweep point: the first N selected hosts
    cache_pass: Literal["cold", "warm"] | None = None  # the two runs of cache: warm

    @property
    def params(self) -> dict[str, Any]:
        params = self.workload.model_dump(exclude={"name", "type", "warm_command"}, exclude_none=True)
        params["cache"] = self.cache_pass or CACHE_STATES[self.workload.cache]
        for policy in ("warmup", "allow_caching", "profilers"):  # said only when set
            if not params[policy]:
                del params[policy]
        return {**params, "hosts": self.hosts} if self.hosts else params

    @property
    def drop_caches(self) -> bool:
        return self.workload.cache == "drop" or self.cache_pass == "cold"

    @property
    def point(self) -> tuple[str, str, int | None, str | None]:
        """What the repetitions of one measurement share: backend, workload point, host count, cache pass."""
        return (self.backend.name, self.workload.model_dump_json(), self.hosts, self.cache_pass)

    def label(self) -> str:
        return f"{self.workload.name} on {self.backend.name}, rep {self.repetition}" + (
            f", {self.cache_pass}" if self.cache_pass else ""
        )

    def on(self, selected: list[str]) -> list[str]:
        """The hosts this run runs on, of the selected ones."""
        return selected[: self.hosts] if self.hosts else list(selected)


def run_id(
    campaign: str,
    backend: BaseModel,
    workload: BaseModel,
    repetition: int,
    hosts: int | None = None,
    dataset: Dataset | None = None,
    cache_pass: str | None = None,
) -> str:
    """A hash of everything that decides what a run does: the same file always gives the same ids.

    Fields left at their defaults are not hashed, so a new optional field does not
    change the ids of stored runs.
    """
    config = {
        "campaign": campaign,
        "backend": backend.model_dump(exclude_defaults=True),
        "workload": workload.model_dump(exclude_defaults=True),
        "repetition": repetition,
        **({"hosts": hosts} if hosts else {}),
        **({"dataset": dataset.identity()} if dataset else {}),
        **({"cache_pass": cache_pass} if cache_pass else {}),
    }
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]


NOT_SWEPT = ("warm_command", "profilers")  # list-valued keys that are one value, not a sweep


def _sweep(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """A workload's sweep points: list values as a cartesian product, `zip:` lists paired.

    {'bs': ['4k', '1M'], 'rw': 'read'} → [{'bs': '4k', 'rw': 'read'}, {'bs': '1M', 'rw': 'read'}];
    {'zip': {'bs': ['4k', '1M'], 'iodepth': [32, 4]}} → bs 4k with iodepth 32, bs 1M with iodepth 4.
    """
    raw = dict(raw)
    paired = raw.pop("zip", None)
    rows: list[dict[str, Any]] = [{}]
    if paired is not None:
        if not isinstance(paired, dict) or not paired or not all(isinstance(v, list) and v for v in paired.values()):
            raise ValueError(
                "zip: takes a mapping of keys to lists of equal length, e.g. zip: {bs: [4k, 1M], iodepth: [32, 4]}"
            )
        lengths = {k: len(v) for k, v in paired.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(
                "zip: lists must have equal lengths, got " + ", ".join(f"{k}: {n}" for k, n in lengths.items())
            )
        both = sorted(set(paired) & set(raw))
        if both:
            raise ValueError(f"zip: {', '.join(both)} also given outside zip; give each key once")
        rows = [dict(zip(paired, values, strict=False)) for values in zip(*paired.values(), strict=False)]
    keys = [k for k, v in raw.items() if isinstance(v, list) and k not in NOT_SWEPT]
    return [
        {**raw, **dict(zip(keys, values, strict=False)), **row}
        for values in itertools.product(*(raw[k] for k in keys))
        for row in rows
    ]


def expand(campaign: Campaign, selected_hosts: int | None = None) -> list[Run]:
    """Every run of a campaign, in order: backend, workload, sweep point, host count, repetition, cache pass.

    With order: random each backend's runs are shuffled (the cold and warm runs of
    cache: warm stay together, cold first). `selected_hosts` (how many hosts the
    command selected) checks a hosts_sweep against it.
    """
    counts: list[int | None] = list(campaign.hosts_sweep or [None])
    if selected_hosts is not None and campaign.hosts_sweep and max(campaign.hosts_sweep) > selected_hosts:
        raise UserError(
            f"campaign {campaign.name}: hosts_sweep asks for {max(campaign.hosts_sweep)} hosts but "
            f"only {selected_hosts} are selected; select more with --hosts or lower hosts_sweep"
        )
    shuffle = random.Random(campaign.order_seed).shuffle if campaign.order == "random" else None
    runs = []
    for backend in campaign.backends:
        units = [
            repetition(campaign, backend, workload, rep, count)
            for workload in campaign.workloads
            for count in counts
            for rep in range(1, (1 if getattr(workload, "search", None) else campaign.repetitions) + 1)
        ]
        if shuffle:
            shuffle(units)
        runs += [run for unit in units for run in unit]
    return runs


def repetition(
    campaign: Campaign, backend: Backend, workload: Workload, rep: int, hosts: int | None = None
) -> list[Run]:
    """Repetition `rep` of one workload point on one backend: one run, or its cold and warm runs (cache: warm)."""
    dataset = campaign.dataset if workload.uses_dataset else None
    passes: list[str | None] = ["cold", "warm"] if workload.cache == "warm" else [None]
    return [
        Run(
            run_id=run_id(campaign.name, backend, workload, rep, hosts, dataset, cache_pass),
            campaign=campaign.name,
            backend=backend,
            workload=workload,
            repetition=rep,
            hosts=hosts,
            cache_pass=cache_pass,
        )
        for cache_pass in passes
    ]


def _where(loc: tuple, origin: Sequence[int] = ()) -> str:
    """A pydantic error location as the file writes it; `origin`: each sweep point's index in the file."""
    text = ""
    for position, part in enumerate(loc):
        if isinstance(part, int) and position == 1 and loc[0] == "workloads" and part < len(origin):
            text += f"[{origin[part]}]"
        elif isinstance(part, int):
            text += f"[{part}]"
        elif part in BACKEND_TYPES or part in WORKLOAD_TYPES or part.startswith("function-"):
            continue  # the tag of a discriminated union, or a validator's name
        else:
            text += f".{part}" if text else part
    return text or "(top level)"


def _expected_keys(raw: dict[str, Any], loc: tuple) -> str:
    if len(loc) == 5 and loc[0] == "workloads" and loc[3] == "accelerator":
        model = Accelerator
    elif len(loc) == 2 and loc[0] == "dataset":
        model = Dataset
    elif len(loc) == 4 and loc[0] in ("backends", "workloads") and isinstance(loc[1], int):
        registry = BACKEND_TYPES if loc[0] == "backends" else WORKLOAD_TYPES
        model = registry.get(str(loc[2]))
    elif len(loc) == 1:
        model = Campaign
    else:
        model = None
    return f" (expected one of: {', '.join(model.model_fields)})" if model else ""


def _message(error: dict[str, Any], raw: dict[str, Any], origin: Sequence[int]) -> str:
    kind, loc = error["type"], error["loc"]
    where = _where(loc, origin)
    if kind == "extra_forbidden":
        return f"{where}: unknown key{_expected_keys(raw, loc)}"
    if kind == "union_tag_invalid":
        what = "backend" if loc[0] == "backends" else "workload"
        expected = ", ".join(BACKEND_TYPES if what == "backend" else WORKLOAD_TYPES)
        return f"{where}.type: unknown {what} type {error['ctx']['tag']!r} (expected one of: {expected})"
    if kind == "union_tag_not_found":
        return f"{where}: missing key 'type'"
    if kind == "missing":
        return f"{where}: missing required key"
    message = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return f"{where}: {message}" if loc else message  # a check across keys names its keys itself


def _no_templates(value: Any, source: str, where: str) -> None:
    """Campaign values reach Ansible as variables: a Jinja expression there would be evaluated."""
    if isinstance(value, dict):
        for key, item in value.items():
            _no_templates(item, source, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_templates(item, source, f"{where}[{index}]")
    elif isinstance(value, str) and any(mark in value for mark in ("{{", "{%", "{#")):
        raise UserError(
            f"{source}: {where}: template markers ({{{{, {{%, {{#) are not allowed in campaign "
            "values; write the value literally"
        )


def _points(workload: dict[str, Any]) -> int:
    """How many sweep points a workload makes, counted without making them."""
    count = 1
    for key, value in workload.items():
        if isinstance(value, list) and key not in NOT_SWEPT:
            count *= len(value)
    paired = workload.get("zip")
    if isinstance(paired, dict) and paired:
        count *= max(len(v) if isinstance(v, list) else 1 for v in paired.values())
    return count


def _check_size(data: dict[str, Any], source: str, max_runs: int) -> None:
    """Refuse a campaign too large to be meant, before its sweeps are expanded."""
    workloads, backends = data.get("workloads"), data.get("backends")
    for key, items, limit in (("workloads", workloads, MAX_WORKLOADS), ("backends", backends, MAX_BACKENDS)):
        if isinstance(items, list) and len(items) > limit:
            raise UserError(
                f"{source}: {key}: {len(items):,} entries, more than the {limit:,} a campaign may "
                "have; split it into several campaigns"
            )
    if not isinstance(workloads, list) or not isinstance(backends, list):
        return
    defaults = {k: data[k] for k in WORKLOAD_DEFAULTS if data.get(k) is not None}
    points = sum(
        _points({**defaults, **w}) * (2 if {**defaults, **w}.get("cache") == "warm" else 1)
        for w in workloads
        if isinstance(w, dict)
    )
    repetitions = max(v for v in (data.get("repetitions"), data.get("max_repetitions"), 1) if isinstance(v, int))
    sweep = data.get("hosts_sweep")
    runs = points * len(backends) * repetitions * (len(sweep) if isinstance(sweep, list) and sweep else 1)
    if runs > max_runs:
        raise UserError(
            f"{source}: the campaign makes {runs:,} runs (sweeps x backends x repetitions), more than "
            f"{max_runs:,}; shorten its sweeps, or pass --max-runs {runs} if that many is meant"
        )


def parse(raw: Any, source: str, base_dir: Path, max_runs: int = MAX_RUNS) -> Campaign:
    """Validate a campaign mapping; `source` names the file in errors."""
    if not isinstance(raw, dict):
        raise UserError(
            f"{source}: a campaign file must be a YAML mapping (name:, backends:, workloads:), got {type(raw).__name__}"
        )
    _check_size(raw, source, max_runs)
    _no_templates(raw, source, "")
    data = dict(raw)
    origin: list[int] = []  # the file's index of each sweep point: errors name the file's workload
    if isinstance(data.get("workloads"), list):
        try:
            _unique("workload", [w.get("name") for w in data["workloads"] if isinstance(w, dict)])
        except ValueError as exc:
            raise UserError(f"{source}: workloads: {exc}") from None
        defaults = {k: data[k] for k in WORKLOAD_DEFAULTS if data.get(k) is not None}
        points = []
        for index, workload in enumerate(data["workloads"]):
            made = [workload]
            if isinstance(workload, dict):
                try:
                    made = _sweep({**defaults, **workload})
                except ValueError as exc:
                    raise UserError(f"{source}: workloads[{index}].{exc}") from None
            points += made
            origin += [index] * len(made)
        data["workloads"] = points
    root = data.get("mount_root")
    if isinstance(root, str) and isinstance(data.get("backends"), list):  # <mount_root>/<name> where none is set
        data["backends"] = [
            {**b, "mountpoint": f"{root.rstrip('/')}/{b.get('name')}"}
            if isinstance(b, dict)
            and "mountpoint" not in b
            and b.get("type") in BACKEND_TYPES
            and "mountpoint" in BACKEND_TYPES[b["type"]].model_fields
            else b
            for b in data["backends"]
        ]
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as exc:
        problems = [_message(e, data, origin) for e in exc.errors()]
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise UserError(f"{source}: " + "; ".join(problems[:3]) + more) from None
    return _resolve_jobfiles(campaign, source, base_dir)


def _resolve_jobfiles(campaign: Campaign, source: str, base_dir: Path) -> Campaign:
    """Check each job file for every backend (devices: those all of them allow); keep the checked text."""
    allowed = set.intersection(*(set(getattr(b, "allow_devices", [])) for b in campaign.backends))
    workloads = []
    for index, workload in enumerate(campaign.workloads):
        if isinstance(workload, FioWorkload) and workload.jobfile:
            path = (base_dir / workload.jobfile).resolve()
            try:
                job = fio_jobfile.load_checked(path, sorted(allowed))
            except ValueError as exc:
                raise UserError(f"{source}: workloads[{index}].jobfile: {exc}") from None
            workload = workload.model_copy(update={"jobfile": str(path), "jobtext": job.text})
            refused = [reason for backend in campaign.backends if (reason := backend.refuse(workload))]
            if refused:  # a job file that writes, on a read-only backend
                raise UserError(f"{source}: {refused[0]}")
        workloads.append(workload)
    return campaign.model_copy(update={"workloads": workloads})


def load(path: str | Path, max_runs: int = MAX_RUNS) -> Campaign:
    """Read and validate a campaign file (bounded: iolab.yamlfile); every error names the file and the key."""
    path = Path(path)
    raw = yamlfile.load(path, "campaign file", "--campaign")
    return parse(raw, str(path), path.parent, max_runs)
