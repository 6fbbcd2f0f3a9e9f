"""Check a data set, and the packs kept beside it, against its manifest, byte for byte."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path

from iolab.errors import UserError
from iolab.host.dataset import pack as packing
from iolab.host.dataset.manifest import Manifest


@dataclasses.dataclass
class Verification:
    root: Path
    manifest_hash: str
    files: int  # files checked
    bytes: int
    packs: dict[str, int]  # pack directory -> samples checked
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(
    root: Path, packs: bool = True, workers: int = 4, progress: Callable[[str, int, int], None] | None = None
) -> Verification:
    """Read every file (sha256 vs the manifest) and, with packs, every sample of root/<format>/.

    progress(what, done, total) is called as files and samples are checked.
    """
    root = Path(root)
    manifest = Manifest.load(root)
    problems = manifest.check_contents(
        root, workers=workers, progress=(lambda d, t: progress("files", d, t)) if progress else None
    )
    checked: dict[str, int] = {}
    if packs:
        for directory in sorted(p.parent for p in root.glob(f"*/{packing.PACK_INFO}")):
            name = directory.name
            try:
                info = packing.PackInfo.load(directory)
            except UserError as exc:
                problems.append(str(exc))
                continue
            problems.extend(
                packing.check(directory, manifest, info, functools.partial(progress, name) if progress else None)
            )
            checked[name] = info.samples
    return Verification(
        root=root,
        manifest_hash=manifest.hash,
        files=len(manifest.entries),
        bytes=manifest.total_bytes,
        packs=checked,
        problems=problems,
    )
