"""strace's log (`strace -f -ttt -T -y -s 0`) → a trace's records: the file I/O under one root (stdlib only).

Each line is `PID EPOCH.USEC call(args) = result <seconds>`; with -f a call another process
interrupts is split into `call(args <unfinished ...>` and `<... call resumed>rest`, joined here
on the PID. -y names each descriptor's file (`4</data/x.jpg>`), so reads need no open to be
seen. Offsets are followed per descriptor and file as the kernel does: 0 at open, advanced by
read, write, readv, writev, set by lseek's result; pread, pwrite, preadv, pwritev give theirs.
The record's length is what the call returned (bytes moved, not asked for). Threads share their
descriptors' positions, and so do the records here (keyed by descriptor and file, not process);
two processes reading one file through the same descriptor number at once would mix theirs.
mmap'd reads are page faults, not calls: strace cannot see them (docs/TRACES.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Any

from iolab.shared.trace import Record

# The calls the capture asks strace for (-e trace=...); lseek and dup only move positions.
CALLS = (
    "open,openat,openat2,creat,read,pread64,readv,preadv,preadv2,write,pwrite64,writev,pwritev,pwritev2,"
    "fsync,fdatasync,close,lseek"
)
OPTIONS = ["-f", "-ttt", "-T", "-y", "-qq", "-s", "0", "-e", f"trace={CALLS}"]
# A finished call: PID, seconds, µs, the call, its first argument's descriptor and file (-y's `N</path>`), the
# other arguments, the result and its file (an open's), the duration's seconds and µs.
_FINISHED = re.compile(
    r"(\d+) +(\d+)\.(\d{6}) (\w+)\((?:(\d+)<([^>]*)>)?(.*)\) = (-?\d+)(?:<([^>]*)>)?.* <(\d+)\.(\d{6})>$"
)
_KINDS = dict.fromkeys(("open", "openat", "openat2", "creat"), "open")
_KINDS |= {"read": "read", "readv": "read", "write": "write", "writev": "write", "lseek": "lseek", "close": "close"}
_KINDS |= dict.fromkeys(("pread64", "preadv", "preadv2"), "pread") | {"fsync": "fsync", "fdatasync": "fdatasync"}
_KINDS |= dict.fromkeys(("pwrite64", "pwritev", "pwritev2"), "pwrite")
_UNFINISHED = " <unfinished ...>"


class StraceError(ValueError):
    """The text is not strace's log with the options iolab asks for."""


def _finished(lines: Iterable[str], prefix: str, state: _State) -> Iterator[tuple[str, ...]]:
    """_FINISHED's groups for each finished call that may concern a file under `prefix`, the halves of an
    interrupted call joined on its PID (the start the first half's); other lines are counted in `state.outside`."""
    pending: dict[str, str] = {}
    for line in lines:
        if line.endswith(_UNFINISHED) or "resumed>" in line:
            pid, _, rest = line.partition(" ")
            if not rest.lstrip(" ").partition(" ")[2].startswith("<... "):
                pending[pid] = line[: -len(_UNFINISHED)]
                continue
            line = pending.pop(pid, "") + rest[rest.find(" resumed>") + 9 :]
        elif prefix not in line:
            state.outside += 1
            continue
        match = _FINISHED.match(line)
        if match:
            yield match.groups()


def convert(
    text: str, root: str, size_of: Callable[[str], int | None] = lambda name: None
) -> tuple[dict[str, Any], list[Record]]:
    """(the header's files and figures, the records ordered by start, µs from the first) of strace's log, the
    I/O on files under `root` only; `size_of` gives a file's size where it can still be seen (else its extent)."""
    prefix = root.rstrip("/") + "/"
    state = _State(prefix)
    for groups in _finished(text.splitlines(), prefix, state):
        state.call(*groups)
    names = [path[len(prefix) :] for path in state.index]
    kept = _files(names)  # old index → new, directories left out
    if not any(record[2] in kept for record in state.records):
        raise StraceError(
            f"no file I/O under {root} in strace's log: give the root the job read from, and a log of "
            "`strace -f -ttt -T -y` (iolab's capture writes one)"
        )
    state.records.sort(key=itemgetter(5))
    origin = next(record[5] for record in state.records if record[2] in kept)
    records = [(p, o, kept[f], off, n, s - origin, d) for p, o, f, off, n, s, d in state.records if f in kept]
    files = [[name, max(size_of(name) or 0, state.extent[i])] for i, name in enumerate(names) if i in kept]
    left = {"lines_left_out": state.outside, "directories_left_out": len(names) - len(kept)}
    return {"root": root, "files": files, "started_at": origin / 1e6, **left}, records


def _files(names: list[str]) -> dict[int, int]:
    """{index: new index} of the names that are files: a name another one lies under is a directory the job opened
    (to list it, or fsync it after a create), which a replay does not stage as a file."""
    parents = {name[:at] for name in names for at, char in enumerate(name) if char == "/"}
    files = [i for i, name in enumerate(names) if name not in parents]
    return {old: new for new, old in enumerate(files)}


class _State:
    """The positions, files and records of a conversion under way."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.index: dict[str, int] = {}  # a file's whole path → its index
        self.extent: list[int] = []
        self.position: dict[tuple[str, str], int] = {}  # (descriptor, path) → offset
        self.records: list[Record] = []
        self.outside = 0

    def call(self, *groups: str) -> None:
        """One finished call (_FINISHED's groups) → its record, the descriptor's new position."""
        pid, seconds, micros, call, fd, path, args, value, opened, took, took_us = groups
        kind = _KINDS.get(call)
        if kind is None or value[0] == "-":
            return
        if kind == "open":
            fd, path = value, opened
        if path is None or not path.startswith(self.prefix):
            self.outside += 1
            return
        index = self.index.setdefault(path, len(self.extent))
        if index == len(self.extent):
            self.extent.append(0)
        key, moved, offset = (fd, path), int(value), 0
        if kind == "lseek":
            self.position[key] = moved
            return
        if kind in ("read", "write"):
            offset = self.position.get(key, 0)
            self.position[key] = offset + moved
        elif kind in ("pread", "pwrite"):  # the offset is the last argument, before preadv2's and pwritev2's flags
            offset, kind = int(args.rsplit(", ", 2)[1 if call.endswith("v2") else 2]), kind[1:]
        elif kind in ("open", "close"):
            self.position[key] = 0
            moved = 0
        if kind in ("read", "write"):
            self.extent[index] = max(self.extent[index], offset + moved)
            if not moved:
                return
        start, duration = int(seconds) * 1_000_000 + int(micros), int(took) * 1_000_000 + int(took_us)
        self.records.append((int(pid), kind, index, offset, moved, start, duration))
