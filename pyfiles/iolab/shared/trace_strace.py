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
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

from iolab.shared.trace import Record

# The calls the capture asks strace for (-e trace=...); lseek and dup only move positions.
CALLS = (
    "open,openat,openat2,creat,read,pread64,readv,preadv,preadv2,write,pwrite64,writev,pwritev,pwritev2,"
    "fsync,fdatasync,close,lseek"
)
OPTIONS = ["-f", "-ttt", "-T", "-y", "-qq", "-s", "0", "-e", f"trace={CALLS}"]
_LINE = re.compile(r"(\d+) +(\d+)\.(\d{6}) (?:<\.\.\. (\w+) resumed>|(\w+)\()(.*)$")
_OPENS = {"open", "openat", "openat2", "creat"}
_READS = {"read": "read", "readv": "read", "write": "write", "writev": "write"}
_PREADS = {"pread64": "read", "preadv": "read", "preadv2": "read"}
_PREADS |= {"pwrite64": "write", "pwritev": "write", "pwritev2": "write"}
_SYNCS = {"fsync": "fsync", "fdatasync": "fdatasync"}
_UNFINISHED = " <unfinished ...>"


class StraceError(ValueError):
    """The text is not strace's log with the options iolab asks for."""


def _calls(lines: Iterable[str]) -> Iterable[tuple[int, str, int, str, str, int]]:
    """(pid, call, start µs, args, result, duration µs) of each finished call, unfinished halves joined."""
    pending: dict[int, tuple[str, int, str]] = {}
    for line in lines:
        match = _LINE.match(line)
        if not match:
            continue  # signals, exits, strace's own notes
        pid_text, seconds, micros, resumed, call, rest = match.groups()
        pid, start = int(pid_text), int(seconds) * 1_000_000 + int(micros)
        if resumed:
            if pid not in pending:
                continue  # its start was before the log began
            call, start, head = pending.pop(pid)
            rest = head + rest
        if rest.endswith(_UNFINISHED):
            pending[pid] = (call, start, rest[: -len(_UNFINISHED)])
            continue
        args, sep, result = rest.rpartition(") = ")
        if not sep or not result.endswith(">"):
            continue
        value, _, took = result[:-1].rpartition(" <")
        try:
            duration = round(float(took) * 1_000_000)
        except ValueError:
            continue
        yield pid, call, start, args, value, duration


def _fd_path(text: str) -> tuple[int, str] | None:
    """(descriptor, file) of `N</path>` at the start of `text` (a call's first argument or its result)."""
    lt = text.find("<")
    if lt <= 0 or not text[:lt].isdigit():
        return None
    end = text.find(">, ", lt)
    end = text.rfind(">") if end < 0 else end
    return int(text[:lt]), text[lt + 1 : end]


def convert(
    lines: Iterable[str], root: str, size_of: Callable[[str], int | None] = lambda name: None
) -> tuple[dict[str, Any], list[Record]]:
    """(the header's files and figures, the records ordered by start, µs from the first) of strace's log, the
    I/O on files under `root` only; `size_of` gives a file's size where it can still be seen (else its extent)."""
    prefix = root.rstrip("/") + "/"
    state = _State(prefix)
    for pid, call, start, args, value, duration in _calls(lines):
        state.call(pid, call, start, args, value, duration)
    if not state.records and not state.outside:
        raise StraceError("no system call in strace's log: not a log of `strace -f -ttt -T -y`")
    state.records.sort(key=itemgetter(5))
    origin = state.records[0][5] if state.records else 0
    records = [(p, o, f, off, n, s - origin, d) for p, o, f, off, n, s, d in state.records]
    files = [[name, max(size_of(name) or 0, state.extent[i])] for i, name in enumerate(state.index)]
    return {"root": root, "files": files, "started_at": origin / 1e6, "outside_root_calls": state.outside}, records


class _State:
    """The positions, files and records of a conversion under way."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.index: dict[str, int] = {}
        self.extent: list[int] = []
        self.position: dict[tuple[int, str], int] = {}
        self.records: list[Record] = []
        self.outside = 0

    def _file(self, fd_path: tuple[int, str] | None) -> tuple[tuple[int, str], int] | None:
        if fd_path is None:
            return None
        if not fd_path[1].startswith(self.prefix):
            self.outside += 1
            return None
        name = fd_path[1][len(self.prefix) :]
        if name not in self.index:
            self.index[name] = len(self.extent)
            self.extent.append(0)
        return fd_path, self.index[name]

    def call(self, pid: int, call: str, start: int, args: str, value: str, duration: int) -> None:
        if call in _OPENS:
            found = self._file(_fd_path(value))
            if found:
                self.position[found[0]] = 0
                self.records.append((pid, "open", found[1], 0, 0, start, duration))
            return
        found = self._file(_fd_path(args))
        if found is None or value.startswith("-"):
            return
        key, index = found
        if call in _READS or call in _PREADS:
            moved = int(value.split(" ", 1)[0])
            if call in _READS:
                offset = self.position.get(key, 0)
                self.position[key] = offset + moved
            else:  # the offset is the last argument, before preadv2's and pwritev2's flags
                offset = int(args.rsplit(", ", 2)[1 if call.endswith("v2") else 2])
            self.extent[index] = max(self.extent[index], offset + moved)
            if moved:
                self.records.append((pid, _READS.get(call) or _PREADS[call], index, offset, moved, start, duration))
        elif call == "lseek":
            self.position[key] = int(value.split(" ", 1)[0])
        elif call in _SYNCS:
            self.records.append((pid, _SYNCS[call], index, 0, 0, start, duration))
        elif call == "close":
            self.position.pop(key, None)
            self.records.append((pid, "close", index, 0, 0, start, duration))
