"""Backend kind `sshfs`: a directory of another lab host, mounted over SSH with sshfs (FUSE)."""

from __future__ import annotations

from typing import Literal

from iolab.backends.base import Backend
from iolab.schema import (
    AbsPath,
    Bool,
    HostName,
    MountOption,
    Name,
)


class SshfsBackend(Backend):
    """A directory of another lab host (`host`, an inventory host) mounted over SSH with sshfs (FUSE)."""

    name: Name
    type: Literal["sshfs"]
    host: HostName
    path: AbsPath
    readonly: Bool = False
    options: list[MountOption] = []
    mountpoint: AbsPath | None = None

    def places(self) -> list[tuple[str, str, bool]]:
        """Writable, `path` on the serving host is where benchmarks write: no system directory there either."""
        return super().places() + ([("path", self.path, True)] if self.writable else [])
