"""Backend kind `mount`: any file system the host can mount (a vendor NAS, Lustre, BeeGFS, CurveFS)."""

from __future__ import annotations

import posixpath
from typing import Annotated, Literal

from pydantic import AfterValidator, model_validator

from iolab.backends.base import Backend
from iolab.schema import (
    AbsPath,
    Device,
    MountOption,
    Name,
    _fstype,
    _source,
)


class MountBackend(Backend):
    """Any file system the host can mount, named by source, type and options (a vendor NAS, Lustre, BeeGFS, CurveFS)."""

    name: Name
    type: Literal["mount"]
    source: Annotated[str, AfterValidator(_source)]
    fstype: Annotated[str, AfterValidator(_fstype)]
    options: list[MountOption] = []
    readonly: bool = False
    mountpoint: AbsPath | None = None
    allow_devices: list[Device] = []

    def places(self) -> list[tuple[str, str, bool]]:
        """A source that is a directory or an image file of the host (a bind mount, a loop image) is a place
        too: bound from /etc, it would let benchmarks write into /etc. Devices are what this kind mounts."""
        source = posixpath.normpath(self.source) if self.source.startswith("/") else ""
        local = source and not (source + "/").startswith("/dev/")
        return super().places() + ([("source", source, True)] if local else [])

    @model_validator(mode="after")
    def _devices_on_scratch(self) -> MountBackend:
        if self.readonly and self.allow_devices:
            raise ValueError(
                "allow_devices lets fio job files write to those devices; a readonly backend "
                "cannot have them: drop readonly or allow_devices"
            )
        return self
