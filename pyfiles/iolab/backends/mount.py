"""Backend kind `mount`: any file system the host can mount (a vendor NAS, Lustre, BeeGFS, CurveFS)."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, model_validator

from iolab.backends.base import Backend
from iolab.schema import (
    AbsPath,
    Bool,
    Device,
    MountOption,
    Name,
    _fstype,
    _source,
)

if TYPE_CHECKING:
    from iolab.schema import Dataset


class MountBackend(Backend):
    """Any file system the host can mount, named by source, type and options (a vendor NAS, Lustre, BeeGFS, CurveFS)."""

    name: Name
    type: Literal["mount"]
    source: Annotated[str, AfterValidator(_source)]
    fstype: Annotated[str, AfterValidator(_fstype)]
    options: list[MountOption] = []
    readonly: Bool = False
    mountpoint: AbsPath | None = None
    allow_devices: list[Device] = []

    @property
    def local_source(self) -> str:
        """The source when it is a directory or an image file of the host (a bind mount, a loop image), else ''.
        That is a place too: bound from /etc, it would let benchmarks write into /etc. Devices are what this
        kind mounts; a server's export is not on the host."""
        source = posixpath.normpath(self.source) if self.source.startswith("/") else ""
        return "" if (source + "/").startswith("/dev/") else source

    def places(self) -> list[tuple[str, str, bool]]:
        return super().places() + ([("source", self.local_source, True)] if self.local_source else [])

    def role_vars(self, state: str, dataset: Dataset | None = None, formats: Sequence[str] = ()) -> dict[str, Any]:
        """With `storage_mount_local_source`, which the role checks again on the host as it resolves."""
        return {**super().role_vars(state, dataset, formats), "storage_mount_local_source": self.local_source}

    @model_validator(mode="after")
    def _devices_on_scratch(self) -> MountBackend:
        if self.readonly and self.allow_devices:
            raise ValueError(
                "allow_devices lets fio job files write to those devices; a readonly backend "
                "cannot have them: drop readonly or allow_devices"
            )
        return self
