"""Backend kind `tmpfs`: a tmpfs of `size` mounted on each host (memory: the ceiling of a host's own storage)."""

from __future__ import annotations

from typing import Literal

from iolab.backends.base import Backend, Workload
from iolab.schema import AbsPath, Name, Size


class TmpfsBackend(Backend):
    """A tmpfs of `size` mounted on each host (memory: the ceiling of a host's own storage)."""

    name: Name
    type: Literal["tmpfs"]
    size: Size
    mountpoint: AbsPath | None = None

    def refuse(self, workload: Workload) -> str | None:
        """Also what of a workload a run on one host holds at once and the tmpfs cannot (a checkpoint, a trace's
        data set): the workload says it (too_big)."""
        return workload.too_big(f"tmpfs backend {self.name}", self.size) or super().refuse(workload)
