"""Host leases: a host runs one campaign at a time.

    with lease.held(lab, "campaign quick"):      # every host of the lab, or one line and no work
        run_campaign(...)

Before a command touches its hosts it takes a lease on each (one host-side process
per host for the command's life, started in parallel: iolab.shared.leasehold over the
host's own SSH settings from the inventory, or a plain process for a host reached
without SSH). A host that another campaign holds stops the command before anything
runs on any host, with one line: which campaign holds it, since when, from where.

A lease is released when the command ends — normally, by Ctrl-C or SIGTERM, or by a
crash: the holder exits when its connection reaches end of file, and the kernel drops
its lock with it. A command that did not end normally (killed outright) leaves its
record, and the next command to take that host cleans what it left there (its tools,
run files and mounts) and says so. A holder left behind (its connection hung) is recognised as stale
when its campaign's process is verifiably gone: same controller (host name and boot),
and that PID no longer runs with the start time it recorded. `--steal` ends such a
holder and takes the lease; it refuses a holder whose campaign still runs, or one run
from another controller, which this one cannot check.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import shlex
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iolab import paths
from iolab.drive import execute
from iolab.drive.execute import HOST_DIR, OWNER
from iolab.errors import UserError
from iolab.shared import leasehold, processes

if TYPE_CHECKING:
    from iolab.drive.execute import Lab

LEASE_DIR = f"{HOST_DIR}/leases"
SOURCE = Path(leasehold.__file__).read_text()


def _boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def record(what: str) -> dict[str, Any]:
    """Who takes the lease: the holder's record on each host."""
    return {
        "held_for": what,
        "user": getpass.getuser(),
        "controller": socket.gethostname(),
        "checkout": str(paths.ROOT),
        "pid": os.getpid(),
        "pid_start": str(processes.started(os.getpid())),
        "boot_id": _boot_id(),
        "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


def gone(holder: dict[str, Any]) -> str | None:
    """How the holder's campaign is verifiably gone, or None when it runs or this machine cannot tell."""
    if holder.get("controller") != socket.gethostname():
        return None
    if holder.get("boot_id") != _boot_id():
        return f"{holder.get('controller')} has rebooted since"
    pid = holder.get("pid")
    if type(pid) is not int:  # not a record iolab wrote: nothing here can tell
        return None
    if str(processes.started(pid)) != holder.get("pid_start"):
        return f"PID {holder.get('pid')} on {holder.get('controller')} has ended"
    return None


def describe(host: str, holder: dict[str, Any]) -> str:
    return (
        f"{host} is held by {holder.get('held_for', '?')} since {holder.get('since', '?')}, "
        f"from {holder.get('user', '?')}@{holder.get('controller', '?')}:{holder.get('checkout', '?')} "
        f"(PID {holder.get('pid', '?')})"
    )


def _argv(host: str, hostvars: dict[str, Any], args: list[str]) -> list[str]:
    """The holder's argv: run directly for a local host, else through ssh as the inventory says."""
    python = str(hostvars.get("ansible_python_interpreter", ""))
    remote = [python if python.startswith("/") else "python3", "-c", SOURCE, *args]
    if hostvars.get("ansible_connection") == "local":
        return remote
    argv = [
        "ssh",
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "LogLevel=ERROR",
        *shlex.split(str(hostvars.get("ansible_ssh_common_args", ""))),
    ]
    if hostvars.get("ansible_ssh_private_key_file"):
        argv += ["-i", str(hostvars["ansible_ssh_private_key_file"])]
    if hostvars.get("ansible_port"):
        argv += ["-p", str(hostvars["ansible_port"])]
    user = hostvars.get("ansible_user")
    target = hostvars.get("ansible_host", host)
    return [*argv, f"{user}@{target}" if user else str(target), shlex.join(remote)]


def _machine(host: str, hostvars: dict[str, Any]) -> tuple[str, str]:
    """The machine an inventory name reaches: its address and port (this one, for a local connection)."""
    if hostvars.get("ansible_connection") == "local":
        return ("this controller", "")
    return (str(hostvars.get("ansible_host", host)), str(hostvars.get("ansible_port", 22)))


def _one_name_each(lab: Lab) -> None:
    """Two inventory names for one machine would take its lease twice, the second refused as held by this very
    command: refuse them first, naming both."""
    seen: dict[tuple[str, str], str] = {}
    for host in lab.hosts:
        machine = _machine(host, lab.inventory.hostvars.get(host, {}))
        if machine in seen:
            where = f"{machine[0]} port {machine[1]}" if machine[1] else machine[0]
            raise UserError(
                f"{seen[machine]} and {host} are one machine ({where}): a command takes each host once; "
                "select one of them (--hosts), or give each its own address in the inventory"
            )
        seen[machine] = host


class Holder:
    """One host's holder process and its answer."""

    def __init__(self, host: str, hostvars: dict[str, Any], info: dict[str, Any], steal_pid: int | None = None):
        self.host = host
        args = [LEASE_DIR, json.dumps({**info, "host": host})] + ([str(steal_pid)] if steal_pid else [])
        self.state, self.detail = "", dict[str, Any]()
        self.asked = self.answered = 0.0  # this controller's clock around the holder's answer (clock_refusal)
        self.argv = _argv(host, hostvars, args)
        self.ssh = hostvars.get("ansible_connection") != "local"

    def answer(self) -> Holder:
        """Start the holder and read its one line: held, busy, error; or (no line) why it could not start:
        `unreachable` when ssh could not connect, else `error`."""
        self.asked = time.time()
        try:
            # Its own session: a Ctrl-C at the terminal must not release the lease before teardown ends.
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        except OSError as exc:
            self.state, self.detail = "error", {"message": f"cannot start {self.argv[0]}: {exc.strerror}"}
            return self
        assert self.proc.stdout is not None and self.proc.stderr is not None  # Popen(stdout=PIPE, stderr=PIPE)
        line = self.proc.stdout.readline().split(" ", 2)
        self.answered = time.time()
        with contextlib.suppress(ValueError):
            if len(line) == 3 and line[0] == leasehold.LINE and line[1] in ("held", "busy", "error"):
                self.state, self.detail = line[1], json.loads(line[2])
        if self.state == "held":
            return self
        self.release(done=False)  # it has ended, or ends now
        if not self.state:
            err = self.proc.stderr.read().strip().splitlines()
            unreachable = self.ssh and self.proc.returncode == 255  # ssh's own failure: the host was not reached
            self.state = "unreachable" if unreachable else "error"
            self.detail = {"message": err[-1] if err else f"the lease holder exited {self.proc.returncode}"}
        return self

    def release(self, done: bool = True) -> None:
        """Let the host go. `done`: this command's teardown is complete there, and the holder drops its record;
        else the record stays, and the next command to take the host cleans what this one left."""
        if done:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None  # Popen(stdin=PIPE)
                self.proc.stdin.write(leasehold.RELEASE.decode())
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


CLOCK_AGREEMENT = 1.0  # s: the most a host's clock may differ from the controller's (MinIO warp refuses more too)


def clock_refusal(holder: Holder) -> str | None:
    """Why a host's clock disagrees with this controller's by more than CLOCK_AGREEMENT, or None. The holder read
    its clock as it started and as it answered (leasehold's `clock`), between this controller's asking and its
    reading the answer, so the offset lies within [answered_clock - answered, started_clock - asked] whatever the
    network's delay: refused only when all of that interval lies past the bound (never on a slow answer alone)."""
    clock = holder.detail.get("clock")
    if not (isinstance(clock, list) and len(clock) == 2 and all(isinstance(t, int | float) for t in clock)):
        return None  # a holder of an older release says nothing of its clock
    low, high = clock[1] - holder.answered, clock[0] - holder.asked
    if low > CLOCK_AGREEMENT:
        way, by = "ahead of", low
    elif high < -CLOCK_AGREEMENT:
        way, by = "behind", -high
    else:
        return None
    return (
        f"{holder.host}'s clock is at least {by:.3g} s {way} this controller's (more than {CLOCK_AGREEMENT:g} s): "
        "its runs would not start together with the others'; sync its clock (chrony or NTP) and run again"
    )


def _takeover(previous: dict[str, Any], answer: dict[str, Any]) -> str:
    """What taking over a lease left by a command that did not end normally found and cleaned, in one line."""
    said = (
        f"the lease of {previous.get('held_for')} (since {previous.get('since')}, PID {previous.get('pid')} "
        f"on {previous.get('controller')}) was never released (its command, or this host, ended first); "
        "taken over"
    )
    if answer.get("clean_error"):
        return f"{said}; cleaning what it left failed: {answer['clean_error']}"
    cleaned = answer.get("cleaned") or []
    return f"{said}; " + ("cleaned what it left: " + "; ".join(cleaned) if cleaned else "nothing of it was left")


def _take(lab: Lab, hosts: list[str], info: dict[str, Any], steal: dict[str, int]) -> list[Holder]:
    def start(host: str) -> Holder:
        return Holder(host, lab.inventory.hostvars.get(host, {}), info, steal.get(host)).answer()

    with ThreadPoolExecutor(max_workers=min(32, len(hosts))) as pool:
        futures = [pool.submit(start, host) for host in hosts]
        return [f.result() for f in futures]


@contextlib.contextmanager
def held(lab: Lab, what: str, steal: bool = False) -> Iterator[None]:
    """Hold every host of `lab` for `what` (e.g. "campaign quick") while the block runs.

    A host held by another campaign, or whose lease could not be taken for sure (the holder
    failed, its record is damaged), raises UserError before the block runs (and the hosts
    taken are let go). A host that ssh could not reach is named in a warning and left to the
    command's own checks of reachability: nothing can run there either.

    A host is released (its record dropped) only where the command's teardown is complete
    (iolab.drive.execute.untorn); elsewhere its record stays, and the next command there cleans up.
    """
    # What this command's runs leave on a host (iolab.drive.execute.OWNER, its release): a command that takes the
    # lease after this one was killed outright cleans it.
    _one_name_each(lab)
    info = {**record(what), "owner": OWNER, "release": lab.extravars()["iolab_release"]}
    holders = _take(lab, lab.hosts, info, {})
    try:
        if steal:
            holders = _steal(lab, holders, info)
        _refuse(holders)
        lab.released = {h.host for h in holders if h.state == "held" and h.detail.get("release_here") is True}
        for holder in holders:
            previous = holder.detail.get("previous") if holder.state == "held" else None
            if previous:
                lab.console.print(f"[yellow]{holder.host}:[/] {_takeover(previous, holder.detail)}")
            if holder.state == "unreachable":
                lab.console.print(f"[yellow]{holder.host}: no lease taken (not reached):[/] {holder.detail['message']}")
        yield
    finally:
        _release(lab, holders)


def _steal(lab: Lab, holders: list[Holder], info: dict[str, Any]) -> list[Holder]:
    """`holders` with each busy host's lease taken over (--steal), where its holder is gone; UserError, before
    anything is taken, naming the first whose holder still runs or cannot be checked from this machine."""
    busy = [h for h in holders if h.state == "busy"]
    if not busy:
        return holders
    refused = []
    for holder in busy:
        reason = gone(holder.detail)
        if reason is None:
            refused.append(holder)
        else:
            lab.console.print(f"[yellow]--steal:[/] {describe(holder.host, holder.detail)}; {reason}")
    if refused:
        first = refused[0]
        why = (
            "that process still runs"
            if first.detail.get("controller") == socket.gethostname()
            else f"this machine cannot check {first.detail.get('controller')}; run --steal there"
        )
        raise UserError(f"--steal refused: {describe(first.host, first.detail)}: {why}")
    taken = _take(lab, [h.host for h in busy], info, {h.host: int(h.detail["holder_pid"]) for h in busy})
    return [h for h in holders if h.state != "busy"] + taken


def _refuse(holders: list[Holder]) -> None:
    """UserError naming the first host still busy, whose clock is off, or whose lease could not be taken."""
    if busy := [h for h in holders if h.state == "busy"]:
        more = f" (and {len(busy) - 1} more host(s))" if len(busy) > 1 else ""
        raise UserError(
            f"{describe(busy[0].host, busy[0].detail)}{more}; wait for it to end, or pass "
            "--steal if that campaign is gone"
        )
    if skewed := [off for h in holders if h.state == "held" and (off := clock_refusal(h))]:
        more = f" (and {len(skewed) - 1} more host(s))" if len(skewed) > 1 else ""
        raise UserError(skewed[0] + more)
    if failed := [h for h in holders if h.state == "error"]:
        more = f" (and {len(failed) - 1} more host(s))" if len(failed) > 1 else ""
        raise UserError(f"{failed[0].host}{more}: no lease taken, so nothing was run: {failed[0].detail['message']}")


def _release(lab: Lab, holders: list[Holder]) -> None:
    """Let go of each lease taken, dropping its record where the command's teardown is complete."""
    for holder in holders:
        if holder.state == "held":
            done = holder.host not in execute.untorn
            if not done:
                lab.console.print(
                    f"[yellow]{holder.host}: teardown incomplete; its lease record stays, and the next "
                    "command on it cleans what is left first[/]"
                )
            holder.release(done)
