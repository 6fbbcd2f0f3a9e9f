"""Run one benchmark tool on a host, on time, and leave a record (host side, stdlib only).

    python -m iolab.host.hostrun run --dir RUN_DIR (--start-at EPOCH | --start-when-told START_FILE) --target PATH
                                [--cwd DIR] [--telemetry-after RAMP] [--before JSON_ARGV] -- fio job.fio
    python -m iolab.host.hostrun step --timeout SECONDS -- python -m iolab.host.fio_jobs prepare ...
    python -m iolab.host.hostrun pack --dir RUN_DIR
    python -m iolab.host.hostrun stop --dir HOST_DIR/runs/OWNER/HOST [--orphaned-mounts]

`run` waits for the start time every host of the run was given (so hosts start together), runs the tool's argv
(never through a shell) with its stdout and stderr in files, and writes `run.json`: the times, the start skew,
the exit status, the page cache before and after, and the host's provenance. If the Ansible task that started it
goes away (Ctrl-C, a lost SSH session), the tool is stopped rather than left holding the mount: its process
group and its whole process tree (fio's job processes call setsid(); iolab.host.live records the tree in
`tool.pids`). `stop` ends tools that an interrupted run of one command left behind, by the PIDs it recorded,
waits for that command's other hostrun calls to finish (an flock on its run directory), and removes its files
(and, after a crashed campaign, its mounts). `--before` runs a step that must succeed first, in the same call:
on a single host, where no common start is needed, fio's prepare (size, lay out, drop caches) and the run are
one task. With `--start-when-told` (iolab.fanout's runs), `run` prints `iolab-ready:<epoch>` once `--before` has
succeeded, then waits for the start time: a line on its stdin (an epoch), or START_FILE, whose modification time
is the start (`touch -d @EPOCH`: through a ClusterShell gateway, which passes stdin to one command of a channel
only; one file for all the hosts of a run, which `stop` removes). The controller sends it once every host of the
run is ready, so that one call per host does the prepare and the common start. Without a start (stdin closed and
the session gone, or `--timeout` s), the tool is not started. `step` runs any other step of a run (fio's prepare
on several hosts, a cache drop, a check on the target) as the tool is run and its output passed on; each step,
`--before`'s too, is ended with its process tree at the run's `--timeout`.

With `--profilers perf,py-spy` (or $IOLAB_PROFILERS, which playbooks/run.yml sets from
the workload's `profilers`), iolab.host.profilers samples the tool while it runs. With
`--pack` (or $IOLAB_PACK_RUN=1, set by run.yml) the run directory ends as one archive in
the same call (`pack` does the same for a run that failed before or after the tool).
An archive up to 8 MiB comes back in the task's own output, as Ansible's slurp returns
a file: one line `iolab-archive:<base64>` that iolab.runner takes, and nothing stays on
the host; a larger one (a profiler's data) stays as RUN_DIR.tar.gz for collect.yml to fetch
($IOLAB_INLINE_MAX sets the limit in bytes).

With `--telemetry-after S`, `run` also samples the host (iolab.host.telemetry: disks,
CPU, memory, network, GPUs) into `telemetry.jsonl` from S seconds after the tool
starts (its ramp) until it ends. The sampler is a thread of this process rather
than a child: it lives and ends exactly with the loop that watches the tool, costs
no second interpreter, measures its own CPU with its thread's clock, and can count
the tool's CPU after this process has reaped it (RUSAGE_CHILDREN); its CPU, about
0.1 % of a core, does not compete with this loop, which mostly sleeps.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

from iolab.host import ceph_osds, facts, live, mounts, profilers, telemetry
from iolab.shared.processes import end_processes
from iolab.shared.protocol import ARCHIVE_LINE, INLINE_MAX, LIVE_FILE, READY_LINE, START_SUFFIX

CALLED_AT = time.time()  # when this command started (its imports done)
PIDFILE = "hostrun.pid"
SCRATCH = "scratch.json"  # RUN.scratch.json, beside a run's directory: what it writes on the storage (note_scratch)
STUCK_AFTER = 15.0  # seconds a stopped tool may take to end before `run` gives up waiting for it


def command_dir(run_dir: Path) -> Path:
    """The directory of the command that a run (or a phase of one) belongs to: HOST_DIR/runs/OWNER/HOST, the
    ancestor whose grandparent is `runs`; a run directory outside that layout is its own command's."""
    for path in [run_dir, *run_dir.parents]:
        if path.parent.parent.name == "runs":
            return path
    return run_dir.parent


def _hold(run_dir: Path) -> None:
    """Share the lock of the run's command directory for this process's life: `stop` takes it exclusively
    before it removes that directory, so that no call of the command writes there afterwards (a call whose
    tool `stop` ended still records and packs its run)."""
    directory = command_dir(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    fcntl.flock(os.open(directory, os.O_RDONLY | os.O_DIRECTORY), fcntl.LOCK_SH)


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)


def note_scratch(run_dir: Path, files: list[Path]) -> None:
    """Record that the run writes `files` outside its directory (on the storage under test: a checkpoint's shards),
    so that `stop` removes them after an interrupted run, or the run's command killed outright (a takeover);
    no files: the run removed them itself, and the record goes."""
    record = run_dir.with_name(f"{run_dir.name}.{SCRATCH}")
    if files:
        _write_json(record, {"files": [str(f) for f in files]})
    else:
        record.unlink(missing_ok=True)


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


def _stop_group(proc: subprocess.Popen, tree: telemetry.ToolTree, grace: float = 5.0) -> None:
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
    """SIGKILL the tool tree's processes that a run recorded (live.PIDS) and that still run as the same
    processes; return those still running after `wait` seconds."""
    try:
        members = {int(pid): int(start) for pid, start in json.loads((run_dir / live.PIDS).read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return []
    return end_processes(members, signal.SIGKILL, wait)


def _watch(
    proc: subprocess.Popen,
    tree: telemetry.ToolTree,
    timeout: float | None,
    started: float,
    parent: int,
    scan: bool = False,
) -> str | None:
    """Wait for `proc` to end; end it with its process tree (_stop_group) once it runs past `timeout` s or the
    task that started this process (`parent`) goes away. Return why it was stopped, None when it ended by itself.
    `scan`: read its tree each turn (where no iolab.host.live thread does), so that what it leaves is ended too."""
    reason, stopping = None, None
    while proc.poll() is None:
        try:
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        if scan:
            tree.cpu_seconds()
        if os.getppid() != parent:
            reason = "the task that started it went away (Ctrl-C or a lost connection)"
        elif timeout and time.time() - started > timeout:
            reason = f"it ran past its timeout of {timeout:.0f} s"
        if reason:
            stopping = stopping or time.time()
            _stop_group(proc, tree)
        if stopping and time.time() - stopping > STUCK_AFTER:
            break
    while stopping and _group_alive(proc.pid) and time.time() - stopping < STUCK_AFTER:
        time.sleep(0.1)  # its other processes (fio's jobs) too
    if proc.poll() is not None:  # ended, or was ended (by `stop`, say): nothing of its tree may stay behind
        tree.cpu_seconds()
        end_processes(tree.members())
    if reason and _group_alive(proc.pid):
        # Blocked on storage that is gone (a request in a FUSE daemon, a dead NFS server): it ends when
        # teardown releases the storage.
        reason += "; it did not end after SIGKILL (blocked on its storage?) and is left to teardown"
    return reason


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
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        reason = _watch(proc, telemetry.ToolTree(proc.pid), timeout, time.time(), parent, scan=True)
        for kept, to in ((out, stdout), (err, stderr)):
            if to is not None:
                kept.seek(0)
                shutil.copyfileobj(kept, to)
                to.flush()
    if reason:
        print(f"{_step_name(argv)} stopped: {reason}", file=sys.stderr, flush=True)
        return 1
    return proc.returncode if proc.returncode is not None else 1


def run(
    run_dir: Path,
    argv: list[str],
    start_at: float | None,
    target: str | None,
    timeout: float | None,
    cwd: Path | None = None,
    telemetry_after: float | None = None,
    before: list[str] | None = None,
    profile: list[str] | None = None,
    told: Path | None = None,
) -> int:
    run_dir.mkdir(parents=True, exist_ok=True)
    parent = os.getppid()
    problems = profilers.missing(profile or [])
    if problems:
        print("; ".join(problems), file=sys.stderr)
        return 1
    if before and (rc := step(before, timeout, stdout=None)) != 0:  # a step that must succeed first: fio's prepare
        return rc
    timeline = {"called_at": CALLED_AT, "ready_at": None, "told_at": None}  # a --start-when-told run's
    if told and (start_at := _start_when_told(told, timeout, parent, timeline)) is None:
        return 1
    cached_before = facts.meminfo().get("Cached", 0)
    with open(run_dir / "stdout.txt", "wb") as out, open(run_dir / "stderr.txt", "wb") as err:
        if start_at is not None:
            time.sleep(max(0.0, start_at - time.time()))
        started = time.time()
        proc = subprocess.Popen(
            argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd or run_dir, start_new_session=True
        )
        (run_dir / PIDFILE).write_text(f"{proc.pid}\n")
        # What it moves each second, for the controller to show while the run's task runs; and its processes
        watched = live.Live(run_dir / LIVE_FILE, proc.pid, run_dir / "stdout.txt", command=argv[0])
        watched.start()
        signal.signal(signal.SIGTERM, lambda *_: _stop_group(proc, watched.tree))
        profiling = profilers.Profilers(run_dir, profile, proc.pid) if profile else None
        if profiling:
            profiling.start()
        sampler = None
        if telemetry_after is not None:
            sampler = telemetry.Sampler(run_dir / telemetry.FILE, proc.pid, after=telemetry_after, target=target)
            sampler.start()
        osds = ceph_osds.started_from_env(run_dir, telemetry_after)  # a Ceph backend's OSDs ($IOLAB_CEPH)
        reason = _watch(proc, watched.tree, timeout, started, parent)
        if reason and _group_alive(proc.pid):  # its PID file stays, outside what is packed, for teardown
            (run_dir.parent / f"{run_dir.name}.{PIDFILE}").write_text(f"{proc.pid}\n")
        ended = time.time()
        watched.stop()
        if sampler is not None:
            for error in sampler.stop().get("errors", []):
                print(f"telemetry: {error}", file=sys.stderr)
        for error in osds.stop()["errors"] if osds else []:
            print(f"OSD telemetry: {error}", file=sys.stderr)
        profiled = profiling.stop() if profiling else None
        for error in (profiled or {}).get("errors", []):
            print(f"profiler: {error}", file=sys.stderr)
    (run_dir / PIDFILE).unlink(missing_ok=True)
    record = {
        "argv": argv,
        "rc": proc.returncode,
        "stopped": reason,
        "start_at": start_at,
        "started_at": started,
        "ended_at": ended,
        "start_skew_s": None if start_at is None else started - start_at,
        **timeline,  # called, ready (prepared), told the start: start_at - told_at is the start's notice
        "launcher": os.environ.get("IOLAB_LAUNCHER", "ansible"),  # clustershell: iolab.fanout started it
        "page_cache_before": cached_before,
        "page_cache_after": facts.meminfo().get("Cached", 0),
        "facts": facts.collect(None if reason else target, run_dir),  # a stopped tool's storage may hang
        "profiling": profiled,
    }
    _write_json(run_dir / "run.json", record)
    if reason:
        print(f"{argv[0]} stopped: {reason}", file=sys.stderr)
    elif proc.returncode != 0:
        tail = (run_dir / "stderr.txt").read_text(errors="replace").strip().splitlines()
        print(f"{argv[0]} exited {proc.returncode}: {tail[-1] if tail else 'no message'}", file=sys.stderr)
    return proc.returncode if proc.returncode is not None else 1


def _start_when_told(start_file: Path, timeout: float | None, parent: int, timeline: dict) -> float | None:
    """Say this host is ready (READY_LINE and the time), then wait for the start time, on stdin or as start_file's
    modification time; note when in `timeline`. None, and why on stderr, when none came."""
    ready = timeline["ready_at"] = time.time()
    print(f"{READY_LINE}{ready!r}", flush=True)
    start_at, reading = None, True  # stdin, until it is closed (the start may still come as the file)
    while start_at is None and os.getppid() == parent and not (timeout and time.time() - ready > timeout):
        if reading and select.select([sys.stdin], [], [], 0.01)[0]:
            line = sys.stdin.readline()
            if line:  # the start time; a line that is none ends the wait without one
                with contextlib.suppress(ValueError):
                    start_at = float(line)
                break
            reading = False
        elif not reading:
            time.sleep(0.01)
        with contextlib.suppress(FileNotFoundError):
            start_at = start_file.stat().st_mtime_ns / 1e9
    timeline["told_at"] = time.time()
    if start_at is None:
        print("no start time came (the session ended, or --timeout passed): the tool was not started", file=sys.stderr)
    return start_at


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (a zombie holds no file system)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def pack(run_dir: Path) -> int:
    """RUN_DIR → one archive, returned in this command's output or left as RUN_DIR.tar.gz; RUN_DIR is removed.

    An archive already there (too large to return, then a later task failed and
    recorded error.json) is merged: its files come back into the new one.
    """
    archive = run_dir.with_name(run_dir.name + ".tar.gz")
    run_dir.mkdir(parents=True, exist_ok=True)
    if archive.exists():
        subprocess.run(["tar", "-xzf", str(archive), "-C", str(run_dir)], check=True)
    tmp = archive.with_name(archive.name + ".tmp")
    done = subprocess.run(
        ["tar", "-C", str(run_dir), "--remove-files", "-czf", str(tmp), "."], capture_output=True, text=True
    )
    if done.returncode != 0:
        print(f"packing {run_dir} failed: {done.stderr.strip()}", file=sys.stderr)
        return 1
    if run_dir.exists():  # tar's --remove-files takes the directory too, where it can
        run_dir.rmdir()
    if tmp.stat().st_size <= INLINE_MAX:
        sys.stdout.write(ARCHIVE_LINE + base64.b64encode(tmp.read_bytes()).decode() + "\n")
        sys.stdout.flush()
        tmp.unlink()
    else:
        tmp.replace(archive)
    return 0


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
    """Whether, within `wait` seconds, no call of the command writes in `runs_dir` any more (see _hold)."""
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
    """Remove the directory of a command's hosts (HOST_DIR/runs/OWNER) and its runs' start files (iolab.fanout)
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

    `orphaned_mounts` (a lease taken over from a campaign that died without tearing down, iolab.lease):
    also unmount what a campaign mounted in this mount namespace and did not keep, lazily, with a
    bounded wait: no campaign holds this host now, so none of it is in use by one.

    `keep_archives` (a run's own teardown, in the same playbook as the run): finished runs' archives
    too large to come back in the run's output stay for collect.yml, which fetches and removes them.
    """
    left = []
    # A run's, a phase of a run's, and that of a tool that `run` gave up waiting for (beside its run's files)
    for pidfile in [*runs_dir.glob(f"*/{PIDFILE}"), *runs_dir.glob(f"*/*/{PIDFILE}"), *runs_dir.glob(f"*.{PIDFILE}")]:
        pid = int(pidfile.read_text().split()[0])
        try:
            os.killpg(pid, signal.SIGKILL)
            print(f"stopped process group {pid} left by {_run_of(pidfile)}")
        except ProcessLookupError:
            pass
        # and the tool's processes in sessions of their own (fio's jobs), as the run recorded them
        stray = kill_recorded(pidfile.parent if pidfile.name == PIDFILE else runs_dir / _run_of(pidfile))
        left += [f"process {p} of {_run_of(pidfile)}" for p in stray]
        deadline = time.time() + 10  # until the group is gone: it may hold the storage under test
        while time.time() < deadline and _group_alive(pid):
            time.sleep(0.05)
        if _group_alive(pid):  # in uninterruptible sleep on storage that is gone, say
            left.append(f"process group {pid} of {_run_of(pidfile)}")
        else:
            pidfile.unlink(missing_ok=True)
    if not left and not _quiet(runs_dir, STUCK_AFTER + 15):
        left.append(f"a call of iolab.host.hostrun still writing in {runs_dir}")
    scratch = [] if left else _remove_scratch(runs_dir)  # the tools have ended: nothing writes there again
    kept = sorted(runs_dir.glob("*.tar.gz")) if keep_archives else []
    runs = [p for p in sorted(runs_dir.iterdir()) if p not in kept] if runs_dir.is_dir() else []
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m iolab.host.hostrun")
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run")
    p_run.add_argument("--dir", type=Path, required=True)
    starts = p_run.add_mutually_exclusive_group()
    starts.add_argument("--start-at", type=float, metavar="EPOCH", help="start the tool at this time")
    starts.add_argument(
        "--start-when-told",
        type=Path,
        metavar="START_FILE",
        help=f"once ready, print {READY_LINE}EPOCH and take the start time (an epoch) from stdin, or as "
        "START_FILE's modification time",
    )
    p_run.add_argument("--target")
    p_run.add_argument("--timeout", type=float)
    p_run.add_argument("--cwd", type=Path, help="the tool's working directory (default: the run's)")
    p_run.add_argument(
        "--telemetry-after",
        type=float,
        metavar="SECONDS",
        help=f"sample the host into {telemetry.FILE} from this long after the tool starts "
        "(its ramp) until it ends; without it, no telemetry",
    )
    p_run.add_argument(
        "--before",
        type=json.loads,
        metavar="JSON_ARGV",
        help="a command (a JSON list) to run first; the tool starts only if it succeeds",
    )
    p_run.add_argument(
        "--profilers",
        default=os.environ.get("IOLAB_PROFILERS", ""),
        help="comma-separated: perf, py-spy (default: $IOLAB_PROFILERS); files kept in RUN_DIR",
    )
    p_run.add_argument(
        "--pack",
        action="store_true",
        default=os.environ.get("IOLAB_PACK_RUN") == "1",
        help="then pack RUN_DIR for collect: returned in the output, or RUN_DIR.tar.gz "
        "when large (default: $IOLAB_PACK_RUN=1)",
    )
    p_run.add_argument(
        "--no-pack",
        dest="pack",
        action="store_false",
        help="leave RUN_DIR unpacked (a phase whose directory a later call packs)",
    )
    p_run.add_argument("argv", nargs=argparse.REMAINDER)
    p_step = sub.add_parser("step", help="run a step of a run that is not its tool, bounded as the tool is")
    p_step.add_argument("--timeout", type=float, required=True, help="seconds; 0: no limit")
    p_step.add_argument("argv", nargs=argparse.REMAINDER)
    sub.add_parser("pack").add_argument("--dir", type=Path, required=True)
    p_stop = sub.add_parser("stop")
    p_stop.add_argument("--dir", type=Path, required=True)
    p_stop.add_argument(
        "--orphaned-mounts",
        action="store_true",
        help="also unmount what a campaign mounted here and did not keep (after a takeover)",
    )
    p_stop.add_argument(
        "--keep-archives",
        action="store_true",
        help="leave finished runs' archives (RUN.tar.gz) for collect.yml, which fetches and removes them",
    )
    return parser


def main(args: list[str] | None = None) -> int:
    parser = _parser()
    opts = parser.parse_args(args)
    if opts.command == "step":
        argv = opts.argv[1:] if opts.argv[:1] == ["--"] else opts.argv
        return step(argv, opts.timeout) if argv else parser.error("give the step's command after --")
    if opts.command != "stop":
        _hold(opts.dir)
    if opts.command == "run":
        argv = opts.argv[1:] if opts.argv[:1] == ["--"] else opts.argv
        if not argv:
            parser.error("give the tool's command after --")
        chosen = [name for name in opts.profilers.split(",") if name]
        unknown = sorted(set(chosen) - set(profilers.NAMES))
        if unknown:
            parser.error(f"unknown profiler(s) {', '.join(unknown)} (expected: {', '.join(profilers.NAMES)})")
        rc = run(
            opts.dir,
            argv,
            opts.start_at,
            opts.target,
            opts.timeout,
            opts.cwd,
            opts.telemetry_after,
            opts.before,
            chosen,
            opts.start_when_told,
        )
        if opts.pack and (opts.dir / "run.json").exists():
            return pack(opts.dir) or rc
        return rc
    if opts.command == "pack":
        return pack(opts.dir)
    return stop(opts.dir, opts.orphaned_mounts, opts.keep_archives)


if __name__ == "__main__":
    sys.exit(main())
