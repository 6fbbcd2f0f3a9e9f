"""Backend kind `local`: a directory on a file system the host already has (local NVMe, an existing mount)."""

from __future__ import annotations

from typing import Literal

from iolab.backends.base import Backend
from iolab.schema import (
    AbsPath,
    Device,
    Name,
)


class LocalBackend(Backend):
    """A directory on a file system the host already has (local NVMe, an existing mount)."""

    name: Name
    type: Literal["local"]
    path: AbsPath
    allow_devices: list[Device] = []

    @property
    def target(self) -> str:
        return self.path

    def places(self) -> list[tuple[str, str, bool]]:
        return [("path", self.path, True)]
