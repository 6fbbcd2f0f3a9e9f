"""A command's runs on a host, as files: where they lie, who writes there, what they wrote on the storage.

HOST_DIR/runs/OWNER/HOST/RUN is one run's directory (OWNER: the controller command, iolab.drive.lease's holder);
RUN.scratch.json beside it lists what the run writes outside it (note_scratch), for `hostrun stop`.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
from pathlib import Path

from iolab.shared import processes

PIDFILE = "hostrun.pid"
CALLS = ".calls"  # HOST_DIR/runs/OWNER/HOST/.calls/PID: the command's hostrun calls there (hold)
LOCK_SUFFIX = ".lock"  # RUN.lock, beside a run's directory: held by the call that runs it and by `pack` (own)
OWN_WAIT_S = 60.0  # s that `pack` waits for a run's call to end (it stops its tool within hostrun's own limits)
SCRATCH = "scratch.json"  # RUN.scratch.json, beside a run's directory: what it writes on the storage (note_scratch)


def command_dir(run_dir: Path) -> Path:
    """The directory of the command that a run (or a phase of one) belongs to: HOST_DIR/runs/OWNER/HOST, the
    ancestor whose grandparent is `runs`; a run directory outside that layout is its own command's."""
    for path in [run_dir, *run_dir.parents]:
        if path.parent.parent.name == "runs":
            return path
    return run_dir.parent


def hold(run_dir: Path) -> None:
    """Share the lock of the run's command directory for this process's life: `stop` takes it exclusively
    before it removes that directory, so that no call of the command writes there afterwards (a call whose
    tool `stop` ended still records and packs its run). The call is noted by PID and start time (CALLS), so
    that `stop` can end one that would hold the lock for long: a call still waiting for a start that a dead
    controller will never send."""
    directory = command_dir(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    fcntl.flock(os.open(directory, os.O_RDONLY | os.O_DIRECTORY), fcntl.LOCK_SH)
    (directory / CALLS).mkdir(exist_ok=True)
    noted = directory / CALLS / str(os.getpid())
    # Whole or not at all: a note seen empty (this call stopped or killed while writing it) would be no call to
    # `stop`, which would then keep the command's directory for a holder it does not know
    write_whole(noted, str(processes.started(os.getpid())))
    atexit.register(_forget, noted)  # a call that ends as it should leaves no note; one killed leaves it for `stop`


def own(run_dir: Path, wait_s: float = OWN_WAIT_S) -> None:
    """Take the run's own lock (RUN.lock beside its directory) for this process's life, waiting up to `wait_s` for
    the call that holds it: a run's call holds it until it has packed, so that `pack` (the controller's, for a call
    it saw end without an answer) waits for a call that lost its session but still ends its tool, records and
    packs, and then merges that call's archive rather than race it for the same files. A call that died frees it; one
    that is stopped (SIGSTOP) is not waited for (the kernel's list of locks names the holder: a PID the holder wrote
    itself would be missing when it was stopped between taking the lock and writing it)."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(own_lock(run_dir), os.O_RDWR | os.O_CREAT, 0o600)
    # (not within it: a call that will not end, which `stop` ends)
    processes.lock_within(fd, wait_s, lambda: not _holder_stopped(fd))


def _holder_stopped(fd: int) -> bool:
    """Whether the call that holds the run's lock is stopped; False while none is known to hold it."""
    holder = processes.lock_holder(fd)
    return holder is not None and processes.stopped(holder)


def own_lock(run_dir: Path) -> Path:
    """The run's lock file (own); `pack` removes it once the run is packed."""
    return run_dir.parent / f"{run_dir.name}{LOCK_SUFFIX}"


def _forget(noted: Path) -> None:
    noted.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # other calls' notes there still, or the command's directory gone
        noted.parent.rmdir()


def calls(directory: Path) -> dict[int, int]:
    """The command's hostrun calls noted in its directory (hold) that still run as those processes: PID → start
    time; this process left out."""
    found = {}
    for entry in (directory / CALLS).glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError):
            found[int(entry.name)] = int(entry.read_text())
    found.pop(os.getpid(), None)
    return {pid: start for pid, start in found.items() if processes.started(pid) == start}


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)


def write_pid(path: Path, pid: int) -> None:
    """A PID file written whole or not at all (`stop` may read it at any moment: an empty one would be no PID)."""
    write_whole(path, f"{pid}\n")


def write_whole(path: Path, text: str) -> None:
    """`text` in `path`, written aside and renamed: a reader sees the whole of it or no file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def note_scratch(run_dir: Path, files: list[Path]) -> None:
    """Record that the run writes `files` outside its directory (on the storage under test: a checkpoint's shards),
    so that `stop` removes them after an interrupted run, or the run's command killed outright (a takeover);
    no files: the run removed them itself, and the record goes."""
    record = run_dir.with_name(f"{run_dir.name}.{SCRATCH}")
    if files:
        write_json(record, {"files": [str(f) for f in files]})
    else:
        record.unlink(missing_ok=True)
