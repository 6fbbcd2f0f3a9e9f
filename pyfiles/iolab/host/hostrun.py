"""Run one benchmark tool on a host, on time, and leave a record (host side, stdlib only).

    python -m iolab.host.hostrun run --dir RUN_DIR (--start-at EPOCH | --start-when-told START_FILE) --target PATH
                                [--cwd DIR] [--telemetry-after RAMP] [--before JSON_ARGV] -- fio job.fio
    python -m iolab.host.hostrun step --timeout SECONDS -- python -m iolab.kinds.fio.host prepare ...
    python -m iolab.host.hostrun pack --dir RUN_DIR
    python -m iolab.host.hostrun kill --dir RUN_DIR      (a fault: the running tool killed, iolab.drive.injector)
    python -m iolab.host.hostrun stop --dir HOST_DIR/runs/OWNER/HOST [--orphaned-mounts]

This module is the command line, `run` and `pack`; the parts live beside it: iolab.host.runs (a command's
runs as files), iolab.host.watch (the watcher that ends a tool and its tree; `step`), iolab.host.runstart
(the common start) and iolab.host.runstop (`stop`).

`run` waits for the start time every host of the run was given (so hosts start together), runs the tool's argv
(never through a shell) with its stdout and stderr in files, and writes `run.json`: the times, the start skew,
the exit status, the page cache before and after, and the host's provenance. If the Ansible task that started it
goes away (Ctrl-C, a lost SSH session), the tool is stopped rather than left holding the mount: its process
group and its whole process tree (fio's job processes call setsid(); iolab.host.live records the tree in
`tool.pids`). `stop` ends tools that an interrupted run of one command left behind, by the PIDs it recorded,
waits for that command's other hostrun calls to finish (an flock on its run directory), and removes its files
(and, after a crashed campaign, its mounts). `--before` runs a step that must succeed first, in the same call:
on a single host, where no common start is needed, fio's prepare (size, lay out, drop caches) and the run are
one task. With `--start-when-told` (iolab.drive.fanout's runs), `run` prints `iolab-ready:<epoch>` once `--before` has
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
a file: one line `iolab-archive:<base64>` that iolab.drive.runner takes, and nothing stays on
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
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from iolab.host import ceph_osds, facts, live, profilers, telemetry
from iolab.host.runs import PIDFILE, hold, own, own_lock, write_json, write_pid
from iolab.host.runstart import wait_for_start, wait_until
from iolab.host.runstop import stop
from iolab.host.watch import end_left, group_alive, step, watch
from iolab.shared import tooltail
from iolab.shared.processes import TOOL_MARK
from iolab.shared.protocol import ARCHIVE_LINE, INLINE_MAX, LIVE_FILE, READY_LINE

CALLED_AT = time.time()  # when this command started (its imports done)


class _Observers:
    """What watches the tool beside it, started with it: its throughput each second and its process tree (for the
    controller's live line, and for `stop`), telemetry, a Ceph backend's OSDs ($IOLAB_CEPH), the profilers."""

    def __init__(
        self,
        run_dir: Path,
        pid: int,
        command: str,
        profile: list[str] | None,
        telemetry_after: float | None,
        target: str | None,
    ):
        self.live = live.Live(run_dir / LIVE_FILE, pid, run_dir / "stdout.txt", command=command)
        self.live.start()
        self.profiling = profilers.Profilers(run_dir, profile, pid) if profile else None
        if self.profiling:
            self.profiling.start()
        self.sampler = None
        if telemetry_after is not None:
            self.sampler = telemetry.Sampler(run_dir / telemetry.FILE, pid, after=telemetry_after, target=target)
            self.sampler.start()
        self.osds = ceph_osds.started_from_env(run_dir, telemetry_after)

    def stop(self) -> dict | None:
        """Stop them all, their errors said on stderr; the profilers' record."""
        self.live.stop()
        errors = [f"telemetry: {e}" for e in (self.sampler.stop().get("errors", []) if self.sampler else [])]
        errors += [f"OSD telemetry: {e}" for e in (self.osds.stop()["errors"] if self.osds else [])]
        profiled = self.profiling.stop() if self.profiling else None
        errors += [f"profiler: {e}" for e in (profiled or {}).get("errors", [])]
        for error in errors:
            print(error, file=sys.stderr)
        return profiled


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
    if told and (start_at := wait_for_start(told, timeout, parent, timeline)) is None:
        return 1
    if start_at is not None and not wait_until(start_at, timeout, parent):
        return 1
    cached_before = facts.meminfo().get("Cached", 0)
    ran = _launch(run_dir, argv, cwd, timeout, parent, profile, telemetry_after, target)
    if ran is None:
        return 127
    record = {
        "argv": argv,
        "rc": ran.rc,
        "stopped": ran.stopped,
        "start_at": start_at,
        "started_at": ran.started,
        "ended_at": ran.ended,
        "start_skew_s": None if start_at is None else ran.started - start_at,
        **timeline,  # called, ready (prepared), told the start: start_at - told_at is the start's notice
        "launcher": os.environ.get("IOLAB_LAUNCHER", "ansible"),  # clustershell: iolab.drive.fanout started it
        "page_cache_before": cached_before,
        "page_cache_after": facts.meminfo().get("Cached", 0),
        "facts": facts.collect(None if ran.stopped else target, run_dir),  # a stopped tool's storage may hang
        "profiling": ran.profiled,
    }
    write_json(run_dir / "run.json", record)
    if ran.stopped:
        print(f"{argv[0]} stopped: {ran.stopped}", file=sys.stderr)
    elif ran.rc != 0:
        said = tooltail.file_message(run_dir / "stderr.txt")  # its error line, not mpirun's banner
        print(f"{argv[0]} exited {ran.rc}: {said or 'no message'}", file=sys.stderr)
    return ran.rc if ran.rc is not None else 1


@dataclasses.dataclass(frozen=True)
class _Ran:
    """How the tool's run went: its exit status, why it was stopped (None: it ended), its times, the profilers'
    record."""

    rc: int | None
    stopped: str | None
    started: float
    ended: float
    profiled: dict | None


def _launch(
    run_dir: Path,
    argv: list[str],
    cwd: Path | None,
    timeout: float | None,
    parent: int,
    profile: list[str] | None,
    telemetry_after: float | None,
    target: str | None,
) -> _Ran | None:
    """Start the tool now, watched, with its output in RUN_DIR's files, and wait for its end; None (said) where it
    could not start."""
    with open(run_dir / "stdout.txt", "wb") as out, open(run_dir / "stderr.txt", "wb") as err:
        started = time.time()
        try:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                cwd=cwd or run_dir,
                start_new_session=True,
                env={**os.environ, TOOL_MARK: str(run_dir.resolve())},  # `hostrun stop` finds all it forks by it
            )
        except OSError as exc:
            print(f"{argv[0]} could not start: {exc.strerror}", file=sys.stderr)
            return None
        write_pid(run_dir / PIDFILE, proc.pid)
        observers = _Observers(run_dir, proc.pid, argv[0], profile, telemetry_after, target)
        reason = watch(proc, observers.live.tree, timeout, started, parent)
        if reason and group_alive(proc.pid):  # its PID file stays, outside what is packed, for teardown
            write_pid(run_dir.parent / f"{run_dir.name}.{PIDFILE}", proc.pid)
        ended = time.time()
        profiled = observers.stop()
    (run_dir / PIDFILE).unlink(missing_ok=True)
    return _Ran(proc.returncode, reason, started, ended, profiled)


def pack(run_dir: Path) -> int:
    """RUN_DIR → one archive, returned in this command's output or left as RUN_DIR.tar.gz; RUN_DIR is removed.

    An archive already there (too large to return, then a later task failed and
    recorded error.json) is merged: its files come back into the new one.
    """
    archive = run_dir.with_name(run_dir.name + ".tar.gz")
    run_dir.mkdir(parents=True, exist_ok=True)
    pidfile = run_dir / PIDFILE
    if pidfile.exists():  # the call that ran the tool died (the OOM killer): its tool, in a session of its own, lives
        pid = int(pidfile.read_text().split()[0])
        left = end_left(pid, run_dir)
        said = f"still running after SIGKILL: {', '.join(left)}" if left else "ended"
        print(f"the tool the run's dead call left (process group {pid}): {said}", file=sys.stderr)
        pidfile.unlink()
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
    own_lock(run_dir).unlink(missing_ok=True)  # packed: nothing of the run stays but what is to be collected
    return 0


def kill(run_dir: Path) -> int:
    """SIGKILL the running tool's process group (a fault, tool_kill: iolab.drive.injector); its run then ends as a tool
    that died ends, recorded by the `run` that watches it."""
    try:
        pid = int((run_dir / PIDFILE).read_text().split()[0])
        os.killpg(pid, signal.SIGKILL)
    except (OSError, ValueError, IndexError) as exc:
        print(f"no tool of {run_dir} to kill: {exc}", file=sys.stderr)
        return 1
    print(f"killed the tool's process group {pid}")
    return 0


def _seconds(text: str) -> float:
    """A --timeout: seconds, a finite number ≥ 0 (0: no limit)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds ≥ 0 (0: no limit)")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m iolab.host.hostrun")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    p_step = sub.add_parser("step", help="run a step of a run that is not its tool, bounded as the tool is")
    p_step.add_argument("--timeout", type=_seconds, required=True, help="seconds; 0: no limit")
    p_step.add_argument("argv", nargs=argparse.REMAINDER)
    sub.add_parser("pack").add_argument("--dir", type=Path, required=True)
    sub.add_parser("kill", help="SIGKILL the run's tool (a fault)").add_argument("--dir", type=Path, required=True)
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


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    p_run.add_argument("--timeout", type=_seconds, help="seconds; 0: no limit")
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


def main(args: list[str] | None = None) -> int:
    parser = _parser()
    opts = parser.parse_args(args)
    if opts.command == "step":
        argv = opts.argv[1:] if opts.argv[:1] == ["--"] else opts.argv
        return step(argv, opts.timeout) if argv else parser.error("give the step's command after --")
    if opts.command == "kill":
        return kill(opts.dir)
    if opts.command != "stop":
        hold(opts.dir)
        own(opts.dir)
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
