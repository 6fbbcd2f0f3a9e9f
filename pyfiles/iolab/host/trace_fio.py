"""A trace replayed through fio's iolog replay, one fio job per traced process (host side, stdlib only).

Each traced process becomes an iolog of fio's version 3 (every line stamped with the µs since the
trace's first I/O: fio 3.33 sleeps between two lines for the difference of their stamps, less the
time the I/O before took; a late I/O is not caught up, so the lateness adds up as the job's would)
and a job of its own (psync, depth 1: each process's order, the processes side by side).
`timing: fast` sets replay_no_stall (the same I/O in the same order, no waits). A file is added
and opened at its first use and closed at its last close (nested opens of one file count once:
fio keeps one descriptor per file and job). `processes: N` replays N copies of each process,
on the same files or each copy on its own (root/copy-K, staged so). fio writes fio.json
(json+), and replay.json says what the controller compares with: each job's recorded end and
fio's wall time.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from iolab.shared import trace

_ACTIONS = {"read": "read", "write": "write", "fsync": "sync", "fdatasync": "datasync"}
RESULT = "replay.json"
NAME_MAX = 256  # fio 3.33 reads an iolog line's file name with sscanf's %256s


class _Log:
    """One fio iolog under way: its lines, its open files, the end of its last I/O as recorded."""

    def __init__(self) -> None:
        self.lines = ["fio version 3 iolog"]
        self.opened: dict[str, int] = {}  # file → nested opens
        self.added: set[str] = set()
        self.first: int | None = None  # the stamp of its first read, write or sync: the job's startdelay
        self.end = 0

    def touch(self, path: str, start: int) -> None:
        if path not in self.added:
            self.added.add(path)
            self.lines.append(f"{start} {path} add")
        if not self.opened.get(path):
            self.lines.append(f"{start} {path} open")
            self.opened[path] = 1

    def record(self, path: str, op: str, offset: int, length: int, start: int, duration: int) -> None:
        self.end = max(self.end, start + duration)
        if op == "open":
            if self.opened.get(path):
                self.opened[path] += 1
            else:
                self.touch(path, start)
        elif op == "close":
            if self.opened.get(path, 0) > 1:
                self.opened[path] -= 1
            elif self.opened.pop(path, 0):
                self.lines.append(f"{start} {path} close")
        else:
            self.touch(path, start)
            self.first = start if self.first is None else self.first
            self.lines.append(f"{start} {path} {_ACTIONS[op]} {offset} {length}")

    def text(self) -> str:
        closes = [f"{self.end} {path} close" for path, count in self.opened.items() if count]
        return "\n".join(self.lines + closes) + "\n"


def iologs(loaded: trace.Trace, root: Path, copies: int, own_files: bool) -> dict[str, _Log]:
    """{job name: its iolog} of every traced process, `copies` times (own_files: copy K under root/copy-K)."""
    names = [name for name, _ in loaded.files]
    logs: dict[str, _Log] = {}
    bases = [str(root / f"copy-{k}") if own_files and copies > 1 else str(root) for k in range(copies)]
    for pid, op, index, offset, length, start, duration in trace.records(loaded):
        for k, base in enumerate(bases):
            log = logs.get(f"p{pid}-{k}")
            if log is None:
                log = logs[f"p{pid}-{k}"] = _Log()
            log.record(f"{base}/{names[index]}", op, offset, length, start, duration)
    return logs


def jobfile(logs: dict[str, Path], delays: dict[str, int], fast: bool) -> str:
    """fio's job file: a job per iolog, psync at depth 1; replay_no_stall where the timing is `fast`, else each job
    starts as late as its process's first I/O (fio 3.33 waits from an iolog's first I/O, not from 0)."""
    lines = ["[global]", "ioengine=psync", "iodepth=1", *(["replay_no_stall=1"] if fast else []), ""]
    for name, path in logs.items():
        lines += [f"[{name}]", f"read_iolog={path}", *([] if fast else [f"startdelay={delays[name]}us"]), ""]
    return "\n".join(lines)


def replay(loaded: trace.Trace, root: Path, out: Path, fast: bool, copies: int, own_files: bool) -> int:
    """fio replays the trace on `root` (staged), writing fio.json and replay.json in `out`; fio's exit status."""
    out.mkdir(parents=True, exist_ok=True)
    longest = max((name for name, _ in loaded.files), key=len, default="")
    if len(f"{root}/copy-{copies}/{longest}") > NAME_MAX:
        raise RuntimeError(
            f"{root}/{longest} is longer than the {NAME_MAX} characters fio's iolog reads of a name; "
            "mount the backend at a shorter path"
        )
    logs = iologs(loaded, root, copies, own_files)
    paths = {}
    for name, log in logs.items():
        paths[name] = out / f"{name}.iolog"
        paths[name].write_text(log.text())
    delays = {name: log.first or 0 for name, log in logs.items()}
    (out / "job.fio").write_text(jobfile(paths, delays, fast))
    argv = ["fio", "--output-format=json+", f"--output={out / 'fio.json'}", str(out / "job.fio")]
    began = time.time()
    status = subprocess.run(argv, stdout=subprocess.DEVNULL, check=False).returncode  # stderr: the run's (hostrun)
    record = {
        "trace": loaded.sha256,
        "timing": "fast" if fast else "recorded",
        "copies": copies,
        "own_files": own_files,
        "recorded_s": loaded.span_us / 1e6,
        "recorded_bytes": {op: moved * copies for op, moved in loaded.bytes.items()},
        "jobs": {
            name: {"recorded_end_s": log.end / 1e6, "startdelay_s": 0 if fast else delays[name] / 1e6}
            for name, log in logs.items()
        },
        "started_at": began,
        "fio_wall_s": time.time() - began,
    }
    (out / RESULT).write_text(json.dumps(record, indent=1, sort_keys=True))
    for path in paths.values():
        path.unlink()  # as long as the trace; the trace itself says it all
    return status
