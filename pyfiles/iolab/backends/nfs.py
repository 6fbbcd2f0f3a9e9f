"""Backend kind `nfs`: an NFS export through the kernel client where present, else iolab's userspace client over
FUSE (iolab.host.storage.nfs_fuse); checked first with libnfs's nfs-ls."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BeforeValidator, Field

from iolab import faults
from iolab.backends.base import Backend
from iolab.schema import (
    AbsPath,
    Bool,
    FsPath,
    HostName,
    MountOption,
    Name,
    _nfs_version,
)


class NfsBackend(Backend):
    """An NFS export: the kernel's client where present, else nfs-rs over FUSE (`method`); checked first with libnfs's
    nfs-ls, which needs no kernel support."""

    fault_kinds: ClassVar[tuple[str, ...]] = (*faults.EVERYWHERE, "nfs_stop")
    name: Name
    type: Literal["nfs"]
    server: HostName
    export: FsPath
    version: Annotated[Literal["3", "4", "4.0", "4.1", "4.2"], BeforeValidator(_nfs_version)] = "4.1"
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    mount_port: Annotated[int, Field(ge=1, le=65535)] | None = None
    options: list[MountOption] = []
    readonly: Bool = False
    method: Literal["auto", "kernel", "fuse"] = "auto"
    mountpoint: AbsPath | None = None
