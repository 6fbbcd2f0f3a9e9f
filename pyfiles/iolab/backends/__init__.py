"""Backend kinds, one module each: its fields, checks and storage role variables (roles/storage_<type>)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from iolab.backends.base import Backend
from iolab.backends.cephfs import CephfsBackend
from iolab.backends.local import LocalBackend
from iolab.backends.mount import MountBackend
from iolab.backends.nfs import NfsBackend
from iolab.backends.rbd import RbdBackend
from iolab.backends.rbd_snapshot import RbdSnapshotBackend
from iolab.backends.s3 import S3Backend
from iolab.backends.sshfs import SshfsBackend
from iolab.backends.tmpfs import TmpfsBackend
from iolab.schema import kinds

AnyBackend = Annotated[
    TmpfsBackend
    | LocalBackend
    | RbdSnapshotBackend
    | CephfsBackend
    | NfsBackend
    | SshfsBackend
    | MountBackend
    | RbdBackend
    | S3Backend,
    Field(discriminator="type"),
]
BACKEND_TYPES: dict[str, type[Backend]] = kinds(AnyBackend)
