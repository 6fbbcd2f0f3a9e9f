"""One data file plus an index: random access with one open file and no metadata calls.

    <dir>/data.bin    the samples back to back, in manifest order
    <dir>/index.tsv   offset, length, label, path of each sample (header line first)

>>> with PackedReader("/var/tmp/iolab/imagenet/packed") as r:     # doctest: +SKIP
...     jpeg, label = r.read(17), r.label(17)
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path

from iolab.dataset.manifest import Record

DATA_NAME = "data.bin"
INDEX_NAME = "index.tsv"
_HEADER = "offset\tlength\tlabel\tpath"


def write(out: Path, records: Iterable[Record]) -> list[str]:
    """Write data.bin and index.tsv into out; returns the names written."""
    out = Path(out)
    offset = 0
    lines = [_HEADER]
    with open(out / DATA_NAME, "wb") as data:
        for record in records:
            data.write(record.data)
            lines.append(f"{offset}\t{len(record.data)}\t{record.label}\t{record.path}")
            offset += len(record.data)
    (out / INDEX_NAME).write_text("\n".join(lines) + "\n")
    return [DATA_NAME, INDEX_NAME]


def read(directory: Path) -> Iterator[Record]:
    """Every sample in order, read through a PackedReader."""
    with PackedReader(directory) as reader:
        for i in range(len(reader)):
            yield Record(position=i, path=reader.path(i), label=reader.label(i), data=reader.read(i))


class PackedReader:
    """Random access to a packed data set: the index is loaded once, reads are os.pread.

    pread does not move a shared file offset, so forked loader workers can share
    the reader; pickling (spawned workers) reopens the file on the other side.
    """

    def __init__(self, path: str | Path) -> None:
        self._fd = -1
        path = Path(path)
        self.directory = path.parent if path.name == DATA_NAME else path
        self._offsets = array("Q")
        self._lengths = array("Q")
        self._labels = array("q")
        self._paths: list[str] = []
        self._load_index()
        self._open()

    def _load_index(self) -> None:
        index = self.directory / INDEX_NAME
        with open(index) as f:
            if f.readline().rstrip("\n") != _HEADER:
                raise ValueError(f"{index}: first line is not the header {_HEADER!r}")
            for number, line in enumerate(f, start=2):
                try:
                    offset, length, label, path = line.rstrip("\n").split("\t")
                    self._offsets.append(int(offset))
                    self._lengths.append(int(length))
                    self._labels.append(int(label))
                except ValueError:
                    raise ValueError(
                        f"{index}:{number}: expected offset, length, label and path "
                        f"separated by tabs, got {line.strip()!r}"
                    ) from None
                self._paths.append(path)

    def _open(self) -> None:
        data = self.directory / DATA_NAME
        self._fd = os.open(data, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        end = self._offsets[-1] + self._lengths[-1] if self._offsets else 0
        size = os.fstat(self._fd).st_size
        if size != end:
            os.close(self._fd)
            self._fd = -1
            raise ValueError(f"{data} holds {size} bytes, its index describes {end}")

    def __len__(self) -> int:
        return len(self._offsets)

    def read(self, i: int) -> bytes:
        """The bytes of sample i: one pread, no open, no stat."""
        length = self._lengths[i]
        data = os.pread(self._fd, length, self._offsets[i])
        if len(data) != length:
            raise OSError(f"{self.directory / DATA_NAME}: short read of sample {i} ({len(data)} of {length} bytes)")
        return data

    def label(self, i: int) -> int:
        return self._labels[i]

    def path(self, i: int) -> str:
        return self._paths[i]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> PackedReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            self.close()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_fd"] = -1
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._open()
