"""Backend kind `nfs`: an NFS export through the kernel client (checked first with libnfs's nfs-ls)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

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
    """An NFS export (kernel client; checked first with libnfs's nfs-ls, which needs no kernel support)."""

    name: Name
    type: Literal["nfs"]
    server: HostName
    export: FsPath
    version: Annotated[Literal["3", "4", "4.0", "4.1", "4.2"], BeforeValidator(_nfs_version)] = "4.1"
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    mount_port: Annotated[int, Field(ge=1, le=65535)] | None = None
    options: list[MountOption] = []
    readonly: Bool = False
    mountpoint: AbsPath | None = None
