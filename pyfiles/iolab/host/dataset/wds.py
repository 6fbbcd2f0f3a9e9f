"""webdataset-style tar shards, written with tarfile alone.

    <dir>/shard-000000.tar: 00000000.jpg 00000000.cls 00000001.jpg 00000001.cls …

The key of a sample is its position in the manifest; `.cls` holds the label in
decimal, as webdataset's decoders expect. Members are plain ustar entries with
fixed owner, mode and mtime, so the same data set gives byte-identical shards.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from iolab.host.dataset.manifest import Record, shards


def shard_name(k: int) -> str:
    return f"shard-{k:06d}.tar"


def write(out: Path, records: Iterable[Record], per_shard: int) -> list[str]:
    """Write the records into shards of per_shard samples; returns the shard names."""
    names: list[str] = []
    for shard in shards(records, per_shard):
        names.append(shard_name(len(names)))
        with tarfile.open(Path(out) / names[-1], "w", format=tarfile.USTAR_FORMAT) as tar:
            for record in shard:
                key = f"{record.position:08d}"
                _add(tar, f"{key}.jpg", record.data)
                _add(tar, f"{key}.cls", str(record.label).encode())
    return names


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o444
    info.mtime = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def read(path: Path) -> Iterator[Record]:
    """The samples of one shard in order; a sample lacking .jpg or .cls is an error."""
    current: str | None = None
    parts: dict[str, bytes] = {}
    with tarfile.open(path, "r:") as tar:
        for member in tar:
            if not member.isfile():
                continue
            key, _, extension = member.name.partition(".")
            if key != current:
                if current is not None:
                    yield _record(path, current, parts)
                current, parts = key, {}
            stream = tar.extractfile(member)
            parts[extension] = stream.read() if stream else b""
    if current is not None:
        yield _record(path, current, parts)


def _record(path: Path, key: str, parts: dict[str, bytes]) -> Record:
    if "jpg" not in parts or "cls" not in parts:
        raise ValueError(f"{path}: sample {key!r} has {sorted(parts)}, expected jpg and cls")
    try:
        position, label = int(key), int(parts["cls"])
    except ValueError:
        raise ValueError(f"{path}: sample {key!r}: key and .cls must be decimal numbers") from None
    return Record(position=position, path=None, label=label, data=parts["jpg"])
