"""Watching a tool a host runs: end it with its whole process tree once it runs past its timeout or the task
that started it goes away (the watcher protocol `hostrun run` and `hostrun step` share).

A tool runs in a session of its own; fio's job processes call setsid() too, so they are in no group of the
tool's: iolab.shared.processes.ToolTree (fed by iolab.host.live) knows the whole tree, and stop_group ends it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

from iolab.host import live, telemetry
from iolab.shared.processes import end_processes, marked

STUCK_AFTER = 15.0  # seconds a stopped tool may take to end before `run` gives up waiting for it


def stop_group(proc: subprocess.Popen, tree: telemetry.ToolTree, grace: float = 5.0) -> None:
    """End the tool: its process group, and every process of its tree (fio's job processes call setsid(),
    so they are in no group of the tool's and would outlive it, holding the storage)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        tree.cpu_seconds()  # the tree as it is now
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        members = tree.members()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        if not end_processes(members, sig, grace):
            return


def kill_recorded(run_dir: Path, wait: float = 10.0) -> list[int]:
    """SIGKILL the tool tree's processes that a run recorded (live.PIDS) and those its environment marks as the
    run's (one the tool forked after the record was last written), that still run as the same processes; return
    those still running after `wait` seconds."""
    members = marked(str(run_dir.resolve()))
    with contextlib.suppress(OSError, ValueError, AttributeError):
        members |= {int(pid): int(start) for pid, start in json.loads((run_dir / live.PIDS).read_text()).items()}
    return end_processes(members, signal.SIGKILL, wait)


def end_left(pid: int, run_dir: Path) -> list[str]:
    """SIGKILL what a run recorded of its tool and wait for it to go: the process group of `pid` (its PID file) and
    its processes in sessions of their own (live.PIDS in `run_dir`); the processes still there after SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    left = [f"process {p}" for p in kill_recorded(run_dir)]
    deadline = time.time() + 10  # until the group is gone: it may hold the storage under test
    while time.time() < deadline and group_alive(pid):
        time.sleep(0.05)
    return left + ([f"process group {pid}"] if group_alive(pid) else [])  # blocked on storage that is gone, say


def watch(
    proc: subprocess.Popen,
    tree: telemetry.ToolTree,
    timeout: float | None,
    started: float,
    parent: int,
    scan: bool = False,
) -> str | None:
    """Wait for `proc` to end; end it with its process tree (stop_group) once it runs past `timeout` s or the
    task that started this process (`parent`) goes away. Return why it was stopped, None when it ended by itself.
    `scan`: read its tree each turn (where no iolab.host.live thread does), so that what it leaves is ended too."""
    reason, stopping, told = None, None, []
    # SIGTERM (`hostrun stop`: a teardown, or a takeover after this call's controller died) ends the tool as a
    # timeout does; this call then records and packs what it has, and leaves.
    previous = signal.signal(signal.SIGTERM, lambda *_: told.append(True))
    while proc.poll() is None:
        try:
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        if scan:
            tree.cpu_seconds()
        if told:
            reason = "it was told to stop (SIGTERM: a teardown, or a takeover of its command's hosts)"
        elif os.getppid() != parent:
            reason = "the task that started it went away (Ctrl-C or a lost connection)"
        elif timeout and time.time() - started > timeout:
            reason = f"it ran past its timeout of {timeout:g} s"
        if reason:
            stopping = stopping or time.time()
            stop_group(proc, tree)
        if stopping and time.time() - stopping > STUCK_AFTER:
            break
    while stopping and group_alive(proc.pid) and time.time() - stopping < STUCK_AFTER:
        time.sleep(0.1)  # its other processes (fio's jobs) too
    if proc.poll() is not None:  # ended, or was ended (by `stop`, say): nothing of its tree may stay behind
        tree.cpu_seconds()
        end_processes(tree.members())
    signal.signal(signal.SIGTERM, previous)
    if reason and group_alive(proc.pid):
        # Blocked on storage that is gone (a request in a FUSE daemon, a dead NFS server): it ends when
        # teardown releases the storage.
        reason += "; it did not end after SIGKILL (blocked on its storage?) and is left to teardown"
    return reason


def group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (a zombie holds no file system)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _step_name(argv: list[str]) -> str:
    """A step's name for its messages: `MODULE SUBCOMMAND` of `python -m MODULE SUBCOMMAND`, else the program."""
    return " ".join(argv[2:4]) if argv[1:2] == ["-m"] else Path(argv[0]).name


def step(
    argv: list[str],
    timeout: float | None,
    stdout: BinaryIO | None = sys.stdout.buffer,
    stderr: BinaryIO = sys.stderr.buffer,
) -> int:
    """Run one step of a run that is not its tool (fio's prepare, a cache drop, a check on the target) as the tool
    is run: in its own session, ended with its process tree once it runs past `timeout` s or the task that started
    this process goes away, then one line on stderr naming the step, why, and the timeout. Its output goes to
    `stdout` and `stderr` once it has ended (files meanwhile: a process stuck on its storage holds no pipe)."""
    parent = os.getppid()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            print(f"{_step_name(argv)} could not start: {exc.strerror} ({argv[0]})", file=sys.stderr, flush=True)
            return 127
        reason = watch(proc, telemetry.ToolTree(proc.pid), timeout, time.time(), parent, scan=True)
        for kept, to in ((out, stdout), (err, stderr)):
            if to is not None:
                kept.seek(0)
                shutil.copyfileobj(kept, to)
                to.flush()
    if reason:
        print(f"{_step_name(argv)} stopped: {reason}", file=sys.stderr, flush=True)
        return 1
    return proc.returncode if proc.returncode is not None else 1
