"""Backend kind `tmpfs`: a tmpfs of `size` mounted on each host (memory: the ceiling of a host's own storage)."""

from __future__ import annotations

from typing import Literal

from iolab.backends.base import Backend
from iolab.schema import (
    AbsPath,
    Name,
    Size,
)


class TmpfsBackend(Backend):
    """A tmpfs of `size` mounted on each host (memory: the ceiling of a host's own storage)."""

    name: Name
    type: Literal["tmpfs"]
    size: Size
    mountpoint: AbsPath | None = None
