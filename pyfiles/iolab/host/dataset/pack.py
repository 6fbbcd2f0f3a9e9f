"""Pack a data set into one of the formats loaders read, each checked against the manifest.

    pack(root, "packed")     root/packed/   data.bin + index.tsv   (PackedReader)
    pack(root, "wds")        root/wds/      shard-000000.tar …     (webdataset layout)
    pack(root, "tfrecord")   root/tfrecord/ train-00000-of-00002.tfrecord …

Samples go in manifest order. Every source file is checked against its sha256 as it
is read, and every sample is read back from the pack and checked again before the
pack is declared complete by writing `pack.json` (format, manifest hash, files and
their sizes). A pack that is already there for the same manifest and settings is
kept, as `gen` keeps a data set.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

from iolab.errors import UserError
from iolab.host.dataset import packed, tfrecord, wds
from iolab.host.dataset.manifest import Manifest, Record
from iolab.shared.shapes import FORMATS, SAMPLES_PER_SHARD

PACK_INFO = "pack.json"
KIND = "iolab.pack/1"

Progress = Callable[[int, int], None]


@dataclasses.dataclass(frozen=True)
class PackInfo:
    format: str
    manifest_hash: str
    samples: int
    samples_per_shard: int | None  # None for "packed": one data file
    files: dict[str, int]  # name -> size in bytes, in sample order

    @property
    def per_shard(self) -> int:
        """Samples per shard file (wds, tfrecord); a packed pack has one data file and no shards."""
        if self.samples_per_shard is None:
            raise ValueError(f"a {self.format} pack has no shards")
        return self.samples_per_shard

    @property
    def bytes(self) -> int:
        return sum(self.files.values())

    def to_json(self) -> str:
        return json.dumps({"kind": KIND, **dataclasses.asdict(self)}, sort_keys=True, indent=1) + "\n"

    @classmethod
    def load(cls, directory: Path) -> PackInfo:
        path = Path(directory) / PACK_INFO
        try:
            obj = json.loads(path.read_text())
            if obj.pop("kind") != KIND or obj["format"] not in FORMATS:
                raise ValueError(f"expected kind {KIND!r} and a format among {FORMATS}")
            return cls(**obj)
        except FileNotFoundError:
            raise UserError(
                f"{path} not found: {directory} is not a finished pack "
                f"(python -m iolab.host.dataset pack ROOT --format FORMAT)"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{path}: not a pack description ({exc})") from None

    @classmethod
    def of(cls, root: Path, fmt: str, manifest_hash: str) -> PackInfo:
        """The `fmt` pack of the data set at root (root/<fmt>); refused when it was packed from another one."""
        directory = Path(root) / fmt
        info = cls.load(directory)
        if info.format != fmt or info.manifest_hash != manifest_hash:
            raise UserError(f"{directory}: not a {fmt} pack of the data set in {root}; pack it again")
        return info


def pack(
    root: Path,
    fmt: str,
    out: Path | None = None,
    samples_per_shard: int = SAMPLES_PER_SHARD,
    progress: Progress | None = None,
) -> PackInfo:
    """Pack the data set in root as fmt into out (default root/<fmt>); returns its description."""
    if fmt not in FORMATS:
        raise UserError(f"unknown pack format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if samples_per_shard < 1:
        raise UserError(f"samples per shard must be at least 1, got {samples_per_shard}")
    root = Path(root)
    manifest = Manifest.load(root)
    out = Path(out) if out is not None else root / fmt
    per_shard = None if fmt == "packed" else samples_per_shard
    total = len(manifest.entries)

    previous = _previous(out)
    if previous is not None and _kept(out, previous, fmt, manifest.hash, per_shard):
        if progress:
            progress(2 * total, 2 * total)
        return previous
    _clear(out, previous)
    names = _write(out, fmt, _sources(root, manifest, progress), samples_per_shard, total)
    info = PackInfo(
        format=fmt,
        manifest_hash=manifest.hash,
        samples=total,
        samples_per_shard=per_shard,
        files={name: os.stat(out / name).st_size for name in names},
    )
    _seal(out, manifest, info, progress)
    return info


def _kept(out: Path, previous: PackInfo, fmt: str, manifest_hash: str, per_shard: int | None) -> bool:
    """Whether the pack already in out is the one wanted (its format, manifest and shards), whole."""
    return (
        previous.format == fmt
        and previous.manifest_hash == manifest_hash
        and previous.samples_per_shard == per_shard
        and _sizes_match(out, previous)
    )


def _clear(out: Path, previous: PackInfo | None) -> None:
    """Make out ready for a new pack: no pack.json (the pack is not complete from here on), no old files."""
    out.mkdir(parents=True, exist_ok=True)
    (out / PACK_INFO).unlink(missing_ok=True)
    if previous is not None:
        for name in previous.files:
            (out / name).unlink(missing_ok=True)


def _write(out: Path, fmt: str, records: Iterator[Record], samples_per_shard: int, total: int) -> list[str]:
    """Write the records as fmt into out: the names of the files written, in sample order."""
    if fmt == "packed":
        return packed.write(out, records)
    if fmt == "wds":
        return wds.write(out, records, samples_per_shard)
    return tfrecord.write(out, records, samples_per_shard, total)


def _seal(out: Path, manifest: Manifest, info: PackInfo, progress: Progress | None) -> None:
    """Read the pack back against the manifest, then declare it complete (pack.json); refused if it differs."""
    problems = check(out, manifest, info, _offset(progress, info.samples))
    if problems:
        raise UserError(
            f"{out}: the pack does not read back as written ({len(problems)} problems, "
            f"first: {problems[0]}); check the storage under it"
        )
    tmp = out / (PACK_INFO + ".tmp")
    tmp.write_text(info.to_json())
    os.replace(tmp, out / PACK_INFO)


def _previous(out: Path) -> PackInfo | None:
    if not (out / PACK_INFO).is_file():
        return None
    try:
        return PackInfo.load(out)
    except UserError:
        return None


def _sizes_match(out: Path, info: PackInfo) -> bool:
    try:
        return all(os.stat(out / name).st_size == size for name, size in info.files.items())
    except FileNotFoundError:
        return False


def _offset(progress: Progress | None, total: int) -> Progress | None:
    """Progress of the read-back, shown as the second half of the pack's progress."""
    if progress is None:
        return None
    return lambda done, _: progress(total + done, 2 * total)


def _sources(root: Path, manifest: Manifest, progress: Progress | None) -> Iterator[Record]:
    total = len(manifest.entries)
    for position, entry in enumerate(manifest.entries):
        try:
            data = (root / entry.path).read_bytes()
        except OSError as exc:
            raise UserError(
                f"cannot read {root / entry.path}: {exc.strerror or exc}; "
                "the data set is incomplete: remove it and generate it again"
            ) from None
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            raise UserError(
                f"{root / entry.path} differs from the manifest (sha256): "
                "the data set is damaged: remove it and generate it again"
            )
        yield Record(position=position, path=entry.path, label=entry.label, data=data)
        if progress and (position + 1 == total or position % 64 == 63):
            progress(position + 1, 2 * total)


def _shards(directory: Path, info: PackInfo) -> Iterator[tuple[str, int, Callable[[], Iterator[Record]]]]:
    """(name, position of its first sample, reader) for each part of a pack."""
    if info.format == "packed":
        yield packed.DATA_NAME, 0, lambda: packed.read(directory)
        return
    read = wds.read if info.format == "wds" else tfrecord.read
    data_files = list(info.files)
    for k, name in enumerate(data_files):
        yield name, k * info.per_shard, functools.partial(read, directory / name)


def check(
    directory: Path, manifest: Manifest, info: PackInfo | None = None, progress: Progress | None = None
) -> list[str]:
    """Problems found reading every sample of a pack back and comparing it with the manifest."""
    directory = Path(directory)
    info = info or PackInfo.load(directory)
    if info.manifest_hash != manifest.hash:
        return [
            f"{directory}: packed from another data set (manifest {info.manifest_hash[:12]}…, "
            f"this one is {manifest.hash[:12]}…); pack it again"
        ]
    problems = []
    for name, recorded in info.files.items():
        size = _size(directory / name)
        if size is None:
            problems.append(f"{directory / name}: missing")
        elif size != recorded:
            problems.append(f"{directory / name}: {size} bytes, pack.json says {recorded}")
    if problems:
        return problems
    entries = manifest.entries
    done = 0
    for name, first, reader in _shards(directory, info):
        expected = first
        try:
            for record in reader():
                problem = _compare(directory / name, record, expected, entries)
                if problem:
                    problems.append(problem)
                expected += 1
                done += 1
                if progress and done % 64 == 0:
                    progress(done, len(entries))
        except (OSError, ValueError, tarfile.TarError) as exc:
            problems.append(f"{directory / name}: {exc}")
            continue
        end = len(entries) if info.format == "packed" else min(len(entries), first + info.per_shard)
        if expected != end:
            problems.append(f"{directory / name}: {expected - first} samples, expected {end - first}")
    if progress:
        progress(len(entries), len(entries))
    return problems


def _size(path: Path) -> int | None:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


def _compare(where: Path, record: Record, expected: int, entries) -> str | None:
    if expected >= len(entries):
        return f"{where}: more samples than the manifest's {len(entries)}"
    entry = entries[expected]
    if record.position is not None and record.position != expected:
        return f"{where}: sample {expected} is keyed {record.position}"
    if record.path is not None and record.path != entry.path:
        return f"{where}: sample {expected} is {record.path}, the manifest says {entry.path}"
    if record.label != entry.label:
        return f"{where}: sample {expected} ({entry.path}) has label {record.label}, the manifest says {entry.label}"
    if hashlib.sha256(record.data).hexdigest() != entry.sha256:
        return f"{where}: sample {expected} ({entry.path}) differs from the manifest (sha256)"
    return None
