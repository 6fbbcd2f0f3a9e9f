"""The field types of campaign files, with their checks: names, sizes, durations, paths, mount options;
and the campaign's data set, which backends and the campaign both describe.

Every model of a campaign (iolab.campaign.model, iolab.backends, iolab.workloads) builds on these, so a
value means the same and is refused the same way wherever it appears.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool

from iolab.units import parse_duration, parse_size


def _matching(pattern: str, problem: str) -> Callable[[str], str]:
    """A check that a value matches `pattern` in full; `problem` ({value!r} in it) says why not."""

    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise ValueError(problem.format(value=value))
        return value

    return check


_name = _matching(
    r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}",
    "{value!r} is not a valid name: use letters, digits, '.', '_' and '-' (names become directory and mount names)",
)


def _absolute(value: str) -> str:
    if not value.startswith("/") or "\n" in value or "/../" in value + "/":
        raise ValueError(f"{value!r} must be an absolute path without '..'")
    if ":" in value:
        raise ValueError(f"{value!r}: paths may not contain ':' (fio reads it as a file name separator)")
    return value.rstrip("/") or "/"


def _ramp(value: str | int | float) -> float:
    return 0.0 if value in (0, "0", "0s") else parse_duration(value)  # no ramp is a valid choice


Name = Annotated[str, AfterValidator(_name)]
# A campaign's booleans are YAML's true and false: "yes", 1 or [true] are refused, never read as true.
Bool = StrictBool
Size = Annotated[int, BeforeValidator(parse_size)]
Duration = Annotated[float, BeforeValidator(parse_duration)]
AbsPath = Annotated[str, AfterValidator(_absolute)]
Ramp = Annotated[float, BeforeValidator(_ramp)]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def kinds(union: Any, tag: str = "type") -> dict[str, Any]:
    """The models of a discriminated union (`Annotated[A | B | ..., Field(discriminator="type")]`) by their
    `type: Literal[...]` (or another `tag`), in the union's order: the union is the one list of a family's kinds."""
    return {
        value: model for model in get_args(get_args(union)[0]) for value in get_args(model.model_fields[tag].annotation)
    }


def _device(value: str) -> str:
    if not value.startswith("/dev/"):
        raise ValueError(f"{value!r} is not a device (allow_devices names block or character devices in /dev)")
    return value


# Devices a user's fio job file may name (fio_jobfile.check), on scratch backends only.
Device = Annotated[str, AfterValidator(_absolute), AfterValidator(_device)]


_mount_option = _matching(
    r"[A-Za-z0-9_][A-Za-z0-9_.=/+@:-]*",
    "mount option {value!r}: give one option per list item (no commas or blanks), e.g. [noatime, rsize=1048576]",
)


def _no_blank(value: str) -> str:
    if any(c.isspace() for c in value):
        raise ValueError(f"{value!r} may not contain blanks (Ceph reads it from CEPH_ARGS)")
    return value


_host_name = _matching(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}", "{value!r} is not a host name or address")


def _fs_path(value: str) -> str:
    if not value.startswith("/") or "\n" in value or "," in value or "/../" in value + "/":
        raise ValueError(f"{value!r} must be an absolute path inside the file system, without '..' or ','")
    return value.rstrip("/") or "/"


def _source(value: str) -> str:
    if not value or value.startswith("-") or any(c in value for c in "\n\r\0"):
        raise ValueError(f"{value!r} is not a mount source (e.g. nas01:/export, /dev/sdb1, an image file)")
    return value


_fstype = _matching(
    r"[a-z0-9][a-z0-9._-]*", "{value!r} is not a file system type (e.g. nfs, lustre, beegfs, fuse.curvefs)"
)


def _nfs_version(value: object) -> str:
    return str(value)


MountOption = Annotated[str, AfterValidator(_mount_option)]
CephPath = Annotated[str, AfterValidator(_absolute), AfterValidator(_no_blank)]
HostName = Annotated[str, AfterValidator(_host_name)]
FsPath = Annotated[str, AfterValidator(_fs_path)]


class Dataset(Model):
    """The generated data set every host gets on every backend (iolab.host.dataset), packed as workloads need."""

    # imagenet-like: JPEGs; unet3d, cosmoflow, retinanet: MLPerf Storage's samples of those (iolab.host.dataset)
    kind: Literal["imagenet-like", "unet3d", "cosmoflow", "retinanet"] = "imagenet-like"
    files: Annotated[int, Field(ge=1, le=100_000_000)]
    seed: int = 1
    classes: Annotated[int, Field(ge=1, le=1_000_000)] = 100
    formats: list[Literal["packed", "wds", "tfrecord"]] = []

    def identity(self) -> dict[str, Any]:
        """What decides the data set's bytes (formats only add packed copies of them)."""
        return self.model_dump(exclude={"formats"})
