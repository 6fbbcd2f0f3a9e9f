"""A trace: the files a job touched (names under a root, sizes) and its file I/O, in order (stdlib only).

The controller checks a trace before any host is touched; the host stages its files and replays it.
One text file (docs/TRACES.md):

    {"kind": "iolab.trace/1", "root": ..., "files": [[name, bytes], ...], "tracer": ..., ...}   header, JSON
    PID<TAB>OP<TAB>FILE<TAB>OFFSET<TAB>LENGTH<TAB>START_US<TAB>DURATION_US                     one line an I/O
    end<TAB>RECORDS<TAB>SHA256                                                                    the last line

OP is one of OPS, FILE the index of a file in the header's list, START_US the microseconds from the
trace's first I/O, the lines ordered by START_US. The end line's SHA-256 is of every byte before it:
a trace that lacks it was cut short, one whose hash differs was changed, and the hash names the trace.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from operator import add, itemgetter
from pathlib import Path
from typing import Any

KIND = "iolab.trace/1"
OPS = ("open", "close", "read", "write", "fsync", "fdatasync")
MOVES = ("read", "write")  # the ops that move bytes
Record = tuple[int, str, int, int, int, int, int]  # pid, op, file, offset, length, start µs, duration µs


class TraceError(ValueError):
    """Not a trace iolab can replay: the message is one line naming the problem and the fix."""


@dataclasses.dataclass(frozen=True)
class Trace:
    """A checked trace: its header, its files, the figures a replay is compared with, and where its text is."""

    path: Path
    header: dict[str, Any]
    sha256: str
    records: int
    bytes: dict[str, int]  # op → bytes moved (read, write)
    processes: tuple[int, ...]
    span_us: int  # from the first I/O's start to the last one's end

    @property
    def files(self) -> list[tuple[str, int]]:
        return [(str(name), int(size)) for name, size in self.header["files"]]

    @property
    def dataset_bytes(self) -> int:
        return sum(size for _, size in self.files)


def outside(name: str) -> bool:
    """Whether a file name leaves the trace's root (absolute, or through '..')."""
    return not name or name.startswith("/") or ".." in name.split("/") or "\n" in name or "\t" in name


def render(header: dict[str, Any], records: Sequence[Record]) -> str:
    """A trace's text: the header (kind set), the records as given (ordered by start), the end line."""
    head = json.dumps({"kind": KIND, **header}, sort_keys=True) + "\n"
    body = "".join(f"{p}\t{o}\t{f}\t{off}\t{n}\t{s}\t{d}\n" for p, o, f, off, n, s, d in records)
    digest = hashlib.sha256((head + body).encode()).hexdigest()
    return f"{head}{body}end\t{len(records)}\t{digest}\n"


def write(directory: Path, header: dict[str, Any], records: Sequence[Record]) -> Path:
    """The trace written as <directory>/<sha256>.trace (the hash names it), its path."""
    text = render(header, records)
    digest = text.rsplit("\t", 1)[1].strip()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{digest[:16]}.trace"
    path.write_text(text)
    return path


def _split(path: Path) -> tuple[bytes, bytes, bytes]:
    """(header line, records, end line) of a trace's bytes, its header and end line checked for shape."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the trace ({exc.strerror}); give the path of a .trace file") from None
    first, _, rest = data.partition(b"\n")
    if not first.lstrip().startswith(b"{") or f'"kind": "{KIND}"'.encode() not in first:
        raise TraceError(
            f"{path}: not an iolab trace (its first line is not a {KIND} header); capture one with "
            "`./lab trace.capture` or convert one with `./lab trace.convert`"
        )
    body, _, end = rest[:-1].rpartition(b"\n") if rest.endswith(b"\n") else (rest, b"", b"")
    if not end.startswith(b"end\t"):
        body, end = rest, b""
    if not end:
        raise TraceError(f"{path}: the trace is truncated (no end line); capture or copy it again")
    return first, body + b"\n" if body else b"", end


def load(path: Path | str) -> Trace:
    """The trace at `path`, every line checked (TraceError: one line, the first problem)."""
    path = Path(path)
    first, body, end = _split(path)
    _, count, digest = (end.decode(errors="replace").split("\t") + ["", ""])[:3]
    if hashlib.sha256(first + b"\n" + body).hexdigest() != digest.strip():
        raise TraceError(f"{path}: the trace is truncated or changed (its SHA-256 differs from its end line's)")
    try:
        header = json.loads(first)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}: its header is not JSON ({exc.msg}); capture it again") from None
    files = header.get("files")
    if not isinstance(files, list) or not all(isinstance(f, list) and len(f) == 2 for f in files):
        raise TraceError(f"{path}: its header has no list of [name, bytes] files; capture it again")
    for name, size in files:
        if not isinstance(name, str) or outside(name):
            raise TraceError(f"{path}: file {name!r} is outside the trace's root; name files relative to the root")
        if not isinstance(size, int) or size < 0:
            raise TraceError(f"{path}: file {name!r} has size {size!r}; give a whole number of bytes")
    moved, processes, span, records = _check(path, body.decode(errors="replace"), len(files))
    if str(records) != count:
        raise TraceError(f"{path}: the trace is truncated ({records} records, its end line says {count})")
    return Trace(path, header, digest.strip(), records, moved, processes, span)


_LINE = re.compile(r"^(\d+)\t(open|close|read|write|fsync|fdatasync)\t(\d+)\t(\d+)\t(\d+)\t(\d+)\t(\d+)$", re.M)


def _rows(path: Path, body: str) -> list[tuple[str, ...]]:
    """The records' seven fields, as text, every line's shape checked (TraceError names the first bad line)."""
    rows = _LINE.findall(body)
    if len(rows) != body.count("\n"):
        good = set(rows)
        lines = body.splitlines()
        number = next(i for i, line in enumerate(lines) if tuple(line.split("\t")) not in good)
        raise TraceError(
            f"{path}: line {number + 2} is not PID, OP, FILE, OFFSET, LENGTH, START_US, DURATION_US (whole numbers, "
            f"OP one of {', '.join(OPS)}, tab-separated): {lines[number][:60]!r}; capture the trace again"
        )
    return rows


def _check(path: Path, body: str, files: int) -> tuple[dict[str, int], tuple[int, ...], int, int]:
    """(bytes per op, the processes, the span in µs, the record count) of a trace's records, each checked (the
    columns taken whole, in C: a million records in about a second)."""
    rows = _rows(path, body)
    starts = list(map(int, map(itemgetter(5), rows)))
    if starts != sorted(starts):
        number = next(i for i in range(1, len(starts)) if starts[i] < starts[i - 1])
        raise TraceError(
            f"{path}: line {number + 2}: timestamps go backwards ({starts[number]} µs after {starts[number - 1]} µs); "
            "order the records by their start"
        )
    largest = max(map(int, map(itemgetter(2), rows)), default=0)
    if largest >= files:
        raise TraceError(f"{path}: file {largest} is not in the header's {files} files; capture the trace again")
    moved = {op: sum(map(int, re.findall(rf"^\d+\t{op}\t\d+\t\d+\t(\d+)", body, re.M))) for op in MOVES}
    span = max(map(add, starts, map(int, map(itemgetter(6), rows))), default=0)
    return moved, tuple(map(int, dict.fromkeys(map(itemgetter(0), rows)))), span, len(starts)


def _parsed(path: Path, body: str) -> Iterator[Record]:
    """The records of a trace's body."""
    for pid, op, index, offset, length, start, duration in _LINE.findall(body):
        yield int(pid), op, int(index), int(offset), int(length), int(start), int(duration)


def records(trace: Trace) -> Iterator[Record]:
    """The records of a checked trace, in order."""
    _, body, _ = _split(trace.path)
    return _parsed(trace.path, body.decode(errors="replace"))
