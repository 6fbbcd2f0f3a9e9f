"""Backend kind `tmpfs`: a tmpfs of `size` mounted on each host (memory: the ceiling of a host's own storage)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from iolab.backends.base import Backend
from iolab.schema import (
    AbsPath,
    Name,
    Size,
)
from iolab.units import human

if TYPE_CHECKING:
    from iolab.workloads.base import Workload


class TmpfsBackend(Backend):
    """A tmpfs of `size` mounted on each host (memory: the ceiling of a host's own storage)."""

    name: Name
    type: Literal["tmpfs"]
    size: Size
    mountpoint: AbsPath | None = None

    def refuse(self, workload: Workload) -> str | None:
        """Also a checkpoint the tmpfs cannot hold: a run on one host writes all of it there; and a trace's data set."""
        from iolab.workloads.checkpoint import CheckpointWorkload
        from iolab.workloads.replay import ReplayWorkload

        if isinstance(workload, ReplayWorkload) and workload.room > self.size:
            return (
                f"workload {workload.name}: its trace's data set ({human(workload.room, 'B')} staged on each host) "
                f"does not fit tmpfs backend {self.name} ({human(self.size, 'B')}); raise the backend's size"
                + (" or drop own_files" if workload.copies > 1 else "")
            )

        if isinstance(workload, CheckpointWorkload) and workload.room > self.size:
            return (
                f"workload {workload.name}: its checkpoint ({human(workload.room, 'B', si=True)}) does not fit "
                f"tmpfs backend {self.name} ({human(self.size, 'B')}), which holds all of it in a run on one host; "
                "lower the "
                "workload's scale or raise the backend's size"
            )
        return super().refuse(workload)
