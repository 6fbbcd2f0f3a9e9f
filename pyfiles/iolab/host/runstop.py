"""`hostrun stop`: end what an interrupted command's runs left on a host and remove their files.

It ends the tools by the PIDs their runs recorded, waits for the command's other hostrun calls to finish
(an flock on its run directory, iolab.host.runs.hold), removes what the runs wrote on the storage
(iolab.host.runs.note_scratch) and the runs' files, and after a crashed campaign its mounts.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from iolab.host import mounts
from iolab.host.runs import CALLS, PIDFILE, SCRATCH, calls
from iolab.host.watch import STUCK_AFTER, end_left, group_alive
from iolab.shared.processes import end_processes
from iolab.shared.protocol import START_SUFFIX


def _remove_scratch(runs_dir: Path) -> list[str]:
    """Remove what the runs under `runs_dir` noted they wrote on the storage (note_scratch), and each directory
    left empty by it; one line per run."""
    done = []
    for record in sorted(runs_dir.glob(f"*.{SCRATCH}")):
        try:
            files = [Path(f) for f in json.loads(record.read_text())["files"]]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        removed = 0
        for path in files:
            with contextlib.suppress(FileNotFoundError):
                if path.is_dir():  # a run's own work directory on the storage (iolab.kinds.kvcache.host)
                    shutil.rmtree(path)
                else:
                    path.unlink()
                removed += 1
        for directory in sorted({f.parent for f in files}):
            with contextlib.suppress(OSError):
                directory.rmdir()  # only once empty
        if removed:
            done.append(
                f"removed {removed} file(s) that {record.name.removesuffix('.' + SCRATCH)} wrote in "
                f"{', '.join(sorted({str(f.parent) for f in files}))}"
            )
        record.unlink()
    return done


def _release_orphaned_mounts(wait: float = 10.0) -> list[str]:
    """Unmount, lazily, what a campaign mounted in this mount namespace and did not keep: a tmpfs whose source
    is iolab:<backend> (no ':kept'), or a mount whose record (iolab.host.mounts) says it is not kept. A lazy unmount
    returns at once, even on storage that is gone; a FUSE daemon ends when the kernel lets the mount go.
    `umount` itself is given `wait` seconds. Returns one line per mount."""
    done = []
    for mount in reversed(mounts.mountinfo()):  # the innermost first
        found = mounts.record_for(mount)
        source = mount["source"]
        if not (source.startswith("iolab:") and not source.endswith(":kept") or found and not found.get("kept")):
            continue
        if found:
            (mounts.RECORDS / f"{mount['id']}.json").unlink(missing_ok=True)
        try:
            out = subprocess.run(
                ["umount", "-l", mount["target"]], capture_output=True, text=True, timeout=wait, check=False
            )
            how = "unmounted" if out.returncode == 0 else f"could not unmount ({out.stderr.strip()})"
        except subprocess.TimeoutExpired:
            how = f"could not unmount (umount -l still waiting after {wait:.0f} s)"
        done.append(f"{how} {mount['target']} ({mount['fstype']} {source})")
    return done


def _quiet(runs_dir: Path, wait: float) -> bool:
    """Whether, within `wait` seconds, no call of the command writes in `runs_dir` any more (runs.hold)."""
    try:
        fd = os.open(runs_dir, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return True
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True  # held until this process ends: no call of the command starts writing again
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)


def _run_of(pidfile: Path) -> str:
    """The run a PID file is of: its directory's name, or its own name's start when beside that directory."""
    return pidfile.name.removesuffix(f".{PIDFILE}") if pidfile.name != PIDFILE else pidfile.parent.name


def _remove_owner_dir(owner_dir: Path) -> None:
    """Remove the directory of a command's hosts (HOST_DIR/runs/OWNER) and its runs' start files (iolab.drive.fanout)
    once no host has files there; hosts on one file system (simulated ones) stop at once, and may remove it first."""
    try:
        entries = list(owner_dir.iterdir())
    except FileNotFoundError:
        return
    if any(not entry.name.endswith(START_SUFFIX) for entry in entries):
        return  # another host of the command has files here, and may still wait for a start
    for entry in entries:
        entry.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # gone already, or a host of the command wrote there since
        owner_dir.rmdir()


def stop(runs_dir: Path, orphaned_mounts: bool = False, keep_archives: bool = False) -> int:
    """End the tools that this command's runs under `runs_dir` left running (by their recorded PIDs), then
    remove `runs_dir`: a finished run's files have gone to the controller, and an interrupted run is
    recorded as missing and runs again. `runs_dir` is one command's (HOST_DIR/runs/OWNER/HOST): nothing
    outside it is touched. Exit 1, naming them, when tools still run afterwards.

    `orphaned_mounts` (a lease taken over from a campaign that died without tearing down, iolab.drive.lease):
    also unmount what a campaign mounted in this mount namespace and did not keep, lazily, with a
    bounded wait: no campaign holds this host now, so none of it is in use by one.

    `keep_archives` (a run's own teardown, in the same playbook as the run): finished runs' archives
    too large to come back in the run's output stay for collect.yml, which fetches and removes them.
    """
    left = []
    # A run's, a phase of a run's, and that of a tool that `run` gave up waiting for (beside its run's files)
    for pidfile in [*runs_dir.glob(f"*/{PIDFILE}"), *runs_dir.glob(f"*/*/{PIDFILE}"), *runs_dir.glob(f"*.{PIDFILE}")]:
        pid = int(pidfile.read_text().split()[0])
        if group_alive(pid):
            print(f"stopped process group {pid} left by {_run_of(pidfile)}")
        still = end_left(pid, pidfile.parent if pidfile.name == PIDFILE else runs_dir / _run_of(pidfile))
        left += [f"{what} of {_run_of(pidfile)}" for what in still]
        if not still:
            pidfile.unlink(missing_ok=True)
    if not left:
        left += _end_calls(runs_dir)
    scratch = [] if left else _remove_scratch(runs_dir)  # the tools have ended: nothing writes there again
    kept = sorted(runs_dir.glob("*.tar.gz")) if keep_archives else []
    runs = [p for p in sorted(runs_dir.iterdir()) if p not in kept and p.name != CALLS] if runs_dir.is_dir() else []
    if not left and kept:
        for path in runs:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    elif not left:
        shutil.rmtree(runs_dir, ignore_errors=True)
        _remove_owner_dir(runs_dir.parent)
    if runs:
        print(f"removed what {len(runs)} interrupted run(s) left in {runs_dir}")
    for line in scratch:
        print(line)
    for line in _release_orphaned_mounts() if orphaned_mounts else []:
        print(line)
    if left:
        print(f"still running after SIGKILL (files kept in {runs_dir}): {', '.join(left)}", file=sys.stderr)
        return 1
    return 0


def _end_calls(runs_dir: Path) -> list[str]:
    """Wait for the command's hostrun calls to finish (each records and packs its run); end those that would hold
    on — a call still waiting for a start its dead controller will never send, or in a step — with SIGTERM (each
    stops its step or tool and leaves), then SIGKILL. What still holds the command's directory after that."""
    if _quiet(runs_dir, STUCK_AFTER):
        return []
    members = calls(runs_dir)
    if members:
        ended = end_processes(members, signal.SIGTERM, 5.0) and end_processes(members, signal.SIGKILL, 5.0)
        pids = ", ".join(map(str, members))
        print(f"ended {len(members)} call(s) of iolab.host.hostrun still running there (PID {pids})")
        if ended:
            return [f"iolab.host.hostrun (PID {', '.join(map(str, ended))})"]
    if _quiet(runs_dir, 5.0):
        return []
    return [f"a process holding {runs_dir} (not a call iolab.host.hostrun noted)"]
