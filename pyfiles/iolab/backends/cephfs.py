"""Backend kind `cephfs`: a CephFS directory, through the kernel client where present, else ceph-fuse."""

from __future__ import annotations

from typing import Literal

from iolab.backends.base import LAB_CEPH, CephBackend
from iolab.schema import (
    AbsPath,
    Bool,
    FsPath,
    MountOption,
    Name,
)


class CephfsBackend(CephBackend):
    """A CephFS directory (`path` inside file system `fs_name`): kernel client where present, else ceph-fuse."""

    name: Name
    type: Literal["cephfs"]
    path: FsPath = "/"
    fs_name: Name = LAB_CEPH["fs_name"]
    readonly: Bool = False
    method: Literal["auto", "kernel", "fuse"] = "auto"
    options: list[MountOption] = []
    mountpoint: AbsPath | None = None
