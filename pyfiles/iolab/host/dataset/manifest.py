"""The manifest of a data set: every file with its size, sha256 and label.

`<root>/manifest.jsonl` is JSON lines in canonical form (sorted keys, no spaces):
a header line, then one line per file in sample order::

    {"classes":100,"files":2000,"generator":"iolab.host.dataset.gen/1","kind":"iolab.manifest/1","seed":1}
    {"label":0,"path":"train/n000/00000000.jpg","sha256":"9f2c…","size":118093}

Its hash (`Manifest.hash`, what `sha256sum manifest.jsonl` prints) identifies the
data set in sample metadata: same hash, same bytes. The manifest is written last,
atomically, so its presence means the data set is complete.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from iolab.errors import UserError

MANIFEST_NAME = "manifest.jsonl"
KIND = "iolab.manifest/1"


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    path: str  # relative to the data set root, '/'-separated
    size: int
    sha256: str
    label: int


class Record(NamedTuple):
    """One sample as a packed format stores it. Formats keep the position or the path, or both."""

    position: int | None  # index of the entry in the manifest
    path: str | None  # path of the entry in the manifest
    label: int
    data: bytes


def shards(records: Iterable[Record], per_shard: int) -> Iterator[Iterator[Record]]:
    """The records in runs of `per_shard` (the last may be shorter), one run a shard, as the packed formats
    write them; streamed: each run is read to its end before the next one starts."""
    rest = iter(records)
    for first in rest:
        yield itertools.chain([first], itertools.islice(rest, per_shard - 1))


@dataclasses.dataclass(frozen=True)
class Manifest:
    files: int
    seed: int | None
    classes: int
    generator: str | None
    entries: tuple[Entry, ...]

    def canonical(self) -> bytes:
        header = {
            "kind": KIND,
            "files": self.files,
            "seed": self.seed,
            "classes": self.classes,
            "generator": self.generator,
        }
        lines = [_dumps(header)]
        lines.extend(_dumps(dataclasses.asdict(e)) for e in self.entries)
        return "".join(line + "\n" for line in lines).encode()

    @functools.cached_property
    def hash(self) -> str:
        """sha256 of the canonical manifest: the data set's identity in sample metadata."""
        return hashlib.sha256(self.canonical()).hexdigest()

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.entries)

    def write(self, root: Path) -> Path:
        """Write <root>/manifest.jsonl atomically (temporary file, fsync, rename)."""
        path = Path(root) / MANIFEST_NAME
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(self.canonical())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    @classmethod
    def exists(cls, root: Path) -> bool:
        return (Path(root) / MANIFEST_NAME).is_file()

    @classmethod
    def load(cls, root: Path) -> Manifest:
        path = Path(root) / MANIFEST_NAME
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            raise UserError(
                f"{path} not found: generate the data set first "
                f"(python -m iolab.host.dataset gen {root} --files N --seed S)"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read {path}: {exc}") from None
        if not lines:
            raise UserError(f"{path} is empty; remove the data set and generate it again")
        header = _parse_line(path, 1, lines[0], {"kind": str, "files": int, "classes": int})
        if header["kind"] != KIND:
            raise UserError(f"{path}:1: kind is {header['kind']!r}, expected {KIND!r}")
        entries = tuple(_entry(path, n, line) for n, line in enumerate(lines[1:], start=2))
        manifest = cls(
            files=header["files"],
            seed=header.get("seed"),
            classes=header["classes"],
            generator=header.get("generator"),
            entries=entries,
        )
        if len(entries) != manifest.files:
            raise UserError(
                f"{path}: header says {manifest.files} files, found {len(entries)} entries; "
                "remove the data set and generate it again"
            )
        return manifest

    def check_sizes(self, root: Path) -> list[str]:
        """Problems found by a stat of every file: missing, or not the size recorded. Quick."""
        problems = []
        for e in self.entries:
            try:
                size = os.stat(Path(root) / e.path).st_size
            except FileNotFoundError:
                problems.append(f"{e.path}: missing")
                continue
            if size != e.size:
                problems.append(f"{e.path}: {size} bytes, manifest says {e.size}")
        return problems

    def check_contents(
        self, root: Path, workers: int = 4, progress: Callable[[int, int], None] | None = None
    ) -> list[str]:
        """Problems found by reading every file and comparing its sha256 with the manifest."""
        from concurrent.futures import ThreadPoolExecutor

        def check(batch: Iterable[Entry]) -> list[str]:
            found = []
            for e in batch:
                try:
                    data = (Path(root) / e.path).read_bytes()
                except OSError as exc:
                    found.append(f"{e.path}: {exc.strerror or exc}")
                    continue
                if len(data) != e.size:
                    found.append(f"{e.path}: {len(data)} bytes, manifest says {e.size}")
                elif hashlib.sha256(data).hexdigest() != e.sha256:
                    found.append(f"{e.path}: content differs from the manifest (sha256)")
            return found

        # Threads: reads and hashing release the GIL, and a network file system wants
        # several requests in flight.
        batches = [self.entries[i : i + 256] for i in range(0, len(self.entries), 256)]
        problems: list[str] = []
        done = 0
        with ThreadPoolExecutor(max(1, workers)) as pool:
            for batch, found in zip(batches, pool.map(check, batches), strict=False):
                problems.extend(found)
                done += len(batch)
                if progress:
                    progress(done, len(self.entries))
        return problems


def _dumps(obj: dict) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _parse_line(path: Path, number: int, line: str, required: dict[str, type]) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{number}: not JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise UserError(f"{path}:{number}: expected a JSON object")
    for key, kind in required.items():
        if not isinstance(obj.get(key), kind) or isinstance(obj.get(key), bool):
            raise UserError(f"{path}:{number}: key {key!r} must be a {kind.__name__}, got {obj.get(key)!r}")
    return obj


def _entry(path: Path, number: int, line: str) -> Entry:
    obj = _parse_line(path, number, line, {"path": str, "size": int, "sha256": str, "label": int})
    relative = PurePosixPath(obj["path"])
    # Entries are opened relative to the root: never let one point outside it.
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise UserError(f"{path}:{number}: path {obj['path']!r} must be relative, inside the data set")
    return Entry(path=obj["path"], size=obj["size"], sha256=obj["sha256"], label=obj["label"])
