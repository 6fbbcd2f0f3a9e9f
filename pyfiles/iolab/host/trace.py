"""Capture a job's file I/O as a trace, stage a trace's files, replay it through fio (host side, stdlib only).

    python -m iolab.host.trace capture --root ROOT --out DIR [--baseline] [--timeout S] -- COMMAND ...
    python -m iolab.host.trace stage --trace FILE --root DIR [--copies N] [--text TEXT] [--dir RUN_DIR [--drop-caches]]
    python -m iolab.host.trace replay --trace FILE --root DIR --out RUN_DIR [--timing recorded|fast]
                                      [--processes N] [--own-files]

`capture` runs COMMAND (an argv, never through a shell) under strace (iolab.shared.trace_strace's
options), converts strace's log to a trace of the I/O under ROOT, each file's size read where it
still is, and writes DIR/<hash>.trace; its last output line is `iolab-trace: PATH`. With
--baseline the command first runs once untraced (caches dropped before each run when root can),
and the trace's header says both wall times: the capture's own cost. `stage` makes the trace's
files under DIR at their sizes (once: a marker names the trace, a second call with the same
trace and copies leaves them), refusing in one line where the file system has no room; with --text the
trace's text (the controller's checked copy, which the run's argv carries) is written as FILE first, and with
--dir it is a run's prepare, as both run routes call it (iolab.kinds.replay.workload): then the run directory and,
with --drop-caches, the caches synced, dropped and the drop recorded (after the staging, which fills them); its
last line is JSON, what was staged and when the call started (`started_at`).
`replay` is iolab.host.trace_fio's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from iolab.host import caches
from iolab.host.prepare import ready
from iolab.shared import trace, trace_strace

MARKER = ".iolab-trace.json"  # in a staged root: the trace and copies it holds
BLOCK = 1 << 20  # staged files are made of one random block of this size, from the trace's hash


def _strace_version() -> str:
    done = subprocess.run(["strace", "-V"], capture_output=True, text=True, check=False)
    return done.stdout.splitlines()[0] if done.stdout else "strace"


def _timed(argv: list[str], timeout: float | None) -> tuple[float, int]:
    """(wall seconds, exit status) of `argv` run to its end, caches dropped before (where this user may)."""
    caches.drop()
    began = time.monotonic()
    done = subprocess.run(argv, check=False, timeout=timeout)
    return time.monotonic() - began, done.returncode


def capture(root: Path, out: Path, command: list[str], baseline: bool, timeout: float | None) -> Path:
    """The trace of `command`'s I/O under `root`, written in `out`; its header says the tracer and the cost."""
    if shutil.which("strace") is None:
        raise RuntimeError(
            "strace is not installed on this host: provision it (role iolab_host) or apt-get install strace"
        )
    out.mkdir(parents=True, exist_ok=True)
    log = out / f".strace-{os.getpid()}.log"
    untraced = _timed(command, timeout) if baseline else None
    traced_s, status = _timed(["strace", "-o", str(log), *trace_strace.OPTIONS, "--", *command], timeout)
    try:
        text = log.read_text(errors="replace")
    finally:
        log.unlink(missing_ok=True)

    def size_of(name: str) -> int | None:
        try:
            return (root / name).stat().st_size
        except OSError:
            return None

    header, records = trace_strace.convert(text, str(root), size_of)
    header |= {
        "tracer": {"name": "strace", "version": _strace_version(), "options": trace_strace.OPTIONS},
        "command": command,
        "exit_status": status,
        "host": socket.gethostname(),
        "capture": {"traced_s": traced_s}
        | ({"untraced_s": untraced[0], "slowdown": traced_s / untraced[0]} if untraced and untraced[0] > 0 else {}),
    }
    return trace.write(out, header, records)


def _block(digest: str) -> bytes:
    return random.Random(digest).randbytes(BLOCK)


def stage(loaded: trace.Trace, root: Path, copies: int) -> dict:
    """The trace's files under `root` (or root/copy-K for K < copies) at their sizes; what was done."""
    marker = root / MARKER
    wanted = {"trace": loaded.sha256, "copies": copies}
    try:
        if json.loads(marker.read_text()) == wanted:
            return {"staged": False, "reason": "already staged", **wanted}
    except (OSError, ValueError):
        pass
    need = loaded.dataset_bytes * copies
    root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(root).free
    if need > free:
        raise RuntimeError(
            f"the trace's data set ({need:,} B for {copies} cop{'y' if copies == 1 else 'ies'}) does not fit {root} "
            f"({free:,} B free); free space, replay fewer processes with their own files, or use a larger backend"
        )
    block, began = _block(loaded.sha256), time.monotonic()
    for base in [root] if copies == 1 else [root / f"copy-{k}" for k in range(copies)]:
        for name, size in loaded.files:
            path = base / name
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb") as out:
                for at in range(0, size, BLOCK):
                    out.write(block[: min(BLOCK, size - at)])
    marker.write_text(json.dumps(wanted))
    return {"staged": True, "bytes": need, "seconds": time.monotonic() - began, **wanted}


def _prepare(file: Path, text: str | None, root: Path, copies: int, run_dir: Path | None, drop: bool) -> int:
    """`stage`: the trace written from its text (when given) and checked, its files staged; as a run's prepare
    (`run_dir`), then the run directory and the recorded drop (`drop`). Its last line is JSON."""
    started_at = time.time()  # when the call reached the host
    if text is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
    done = stage(trace.load(file), root, copies)
    if run_dir is not None:
        return ready(started_at, run_dir, drop, done)
    print(json.dumps({**done, "started_at": started_at}))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m iolab.host.trace", description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    taken = steps.add_parser("capture", help="run a command under strace; write the trace of its I/O under ROOT")
    taken.add_argument("--root", type=Path, required=True, help="the directory whose files the trace keeps")
    taken.add_argument("--out", type=Path, required=True, help="where the trace goes (DIR/<hash>.trace)")
    taken.add_argument("--baseline", action="store_true", help="run the command untraced first: the capture's cost")
    taken.add_argument("--timeout", type=float, default=None, help="seconds each run of the command may take")
    taken.add_argument("command", nargs="+", help="the command's argv, after --")
    for name in ("stage", "replay"):
        step = steps.add_parser(name, help=f"{name} a trace's files")
        step.add_argument("--trace", type=Path, required=True)
        step.add_argument("--root", type=Path, required=True, help="where the trace's files are staged")
    staged = steps.choices["stage"]
    staged.add_argument("--copies", type=int, default=1, help="copies of the tree, root/copy-K (1: root itself)")
    staged.add_argument("--text", help="the trace's text, written as --trace first (the controller's checked copy)")
    staged.add_argument("--dir", type=Path, help="a run's prepare: then this run directory, made")
    staged.add_argument("--drop-caches", action="store_true", help="and the caches dropped (with --dir), recorded")
    played = steps.choices["replay"]
    played.add_argument("--out", type=Path, required=True, help="the run's directory: fio.json, replay.json")
    played.add_argument("--timing", choices=("recorded", "fast"), default="recorded")
    played.add_argument("--processes", type=int, default=1, help="copies of each traced process")
    played.add_argument("--own-files", action="store_true", help="each copy on its own files (root/copy-K)")
    return parser


def main(argv: list[str] | None = None) -> int:
    opts = _parser().parse_args(argv)
    from iolab.host import trace_fio

    try:
        if opts.step == "capture":
            print(f"iolab-trace: {capture(opts.root, opts.out, opts.command, opts.baseline, opts.timeout)}")
            return 0
        if opts.step == "stage":
            return _prepare(opts.trace, opts.text, opts.root, opts.copies, opts.dir, opts.drop_caches)
        loaded = trace.load(opts.trace)
        return trace_fio.replay(loaded, opts.root, opts.out, opts.timing == "fast", opts.processes, opts.own_files)
    except (trace.TraceError, trace_strace.StraceError, RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"trace {opts.step}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
