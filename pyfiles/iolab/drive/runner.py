"""The one place that talks to Ansible.

Runs playbooks through ansible-runner with a fresh private data directory per
call, shows live progress (host × task) from runner events, and returns what
happened on each host. A host-side failure comes back as data naming the host,
the task and the message, never as a traceback.

Several phases (playbooks) can run in one ansible-playbook process, which
saves its start-up time (≈1 s) per phase on short jobs:

    run([Phase("storage.yml", {"storage_state": "mounted"}), Phase("run.yml")], ...)
"""

from __future__ import annotations

import base64
import dataclasses
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.live import Live
from rich.table import Table

from iolab import paths
from iolab.errors import Terminated
from iolab.parsers import failure_message
from iolab.shared.processes import ToolTree, end_processes
from iolab.shared.protocol import ARCHIVE_LINE, INLINE_MAX


@dataclasses.dataclass(frozen=True)
class Phase:
    playbook: str  # file name under playbooks/
    vars: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class HostOutcome:
    host: str
    task: str = ""  # the task running now, or the one that failed
    ok: int = 0
    changed: int = 0
    failed: bool = False
    unreachable: bool = False
    message: str = ""
    started: float = dataclasses.field(default_factory=time.monotonic)
    ended: float | None = None
    archives: list[bytes] = dataclasses.field(default_factory=list)  # files the host returned (iolab.host.hostrun)

    @property
    def state(self) -> str:
        return "unreachable" if self.unreachable else "failed" if self.failed else "ok"

    def describe(self) -> str:
        what = "unreachable" if self.unreachable else f"failed at task '{self.task}'"
        return f"{self.host}: {what}: {self.message}"


@dataclasses.dataclass
class Result:
    status: str  # successful | failed | canceled | timeout
    rc: int
    hosts: dict[str, HostOutcome]
    log: str  # ansible-playbook's own output, for a failure's details

    @property
    def canceled(self) -> bool:
        return self.status == "canceled"

    def failures(self) -> list[HostOutcome]:
        return [h for h in self.hosts.values() if h.failed or h.unreachable]

    def failed_hosts(self) -> dict[str, tuple[str, str]]:
        """Each host the run failed on or could not reach: (the task, why), what iolab.store.record keeps of it."""
        return {h.host: (h.task, h.describe().split(": ", 1)[1]) for h in self.failures()}

    def ok_hosts(self) -> list[str]:
        return [h.host for h in self.hosts.values() if not (h.failed or h.unreachable)]

    def summary(self) -> str:
        failures = self.failures()
        if failures:
            return "; ".join(h.describe() for h in failures)
        if self.status != "successful":
            tail = [line for line in self.log.splitlines() if line.strip()][-3:]
            return f"ansible-playbook ended {self.status} (rc {self.rc}): " + " | ".join(tail)
        return "ok"


def _take_archives(res: dict[str, Any], into: list[bytes]) -> dict[str, Any]:
    """Move the archives a task returned in its output (iolab.host.hostrun's pack) into `into`.

    Returns the result without them, so that a failure's message never shows one.
    """
    stdout = res.get("stdout")
    if not isinstance(stdout, str) or ARCHIVE_LINE not in stdout:
        return res
    kept = []
    for line in stdout.splitlines():
        if line.startswith(ARCHIVE_LINE):
            into.append(base64.b64decode(line[len(ARCHIVE_LINE) :]))
        else:
            kept.append(line)
    return {**res, "stdout": "\n".join(kept), "stdout_lines": kept}


def _apply(outcome: HostOutcome, kind: str, data: dict[str, Any], res: dict[str, Any]) -> None:
    """One runner event of the host into its outcome."""
    if kind == "runner_on_start" and not outcome.failed:  # a failure keeps naming its own task
        outcome.task = data.get("task", "")
    elif kind == "runner_on_ok":
        outcome.ok += 1
        outcome.changed += bool(res.get("changed"))
    elif kind == "runner_on_failed" and not data.get("ignore_errors"):
        outcome.failed, outcome.task = True, data.get("task", outcome.task)
        outcome.message = failure_message(res)
        outcome.ended = time.monotonic()
    elif kind == "runner_on_unreachable":
        outcome.unreachable, outcome.task = True, data.get("task", outcome.task)
        outcome.message = str(res.get("msg", "unreachable")).strip()
        outcome.ended = time.monotonic()


class _Progress:
    """Runner events → per-host outcomes, drawn as a live table (captioned with a campaign's `status()`)."""

    def __init__(
        self,
        title: str,
        hosts: list[str],
        console: Console,
        status: Callable[[], str] | None = None,
        on_phase: Callable[[int, dict[str, HostOutcome]], None] | None = None,
        on_start: Callable[[float], None] | None = None,
    ):
        self.on_start = on_start
        self.title = title
        self.console = console
        self.status = status
        self.hosts = {h: HostOutcome(h) for h in hosts}
        self.play = ""
        self.started = time.monotonic()
        # Each phase is one play (every playbook of playbooks/ holds one): its own outcomes, handed to
        # `on_phase` as soon as the next phase starts, or the playbook ends (see run()).
        self.on_phase = on_phase
        self.phase = -1  # the phase running (-1: none, or the last one handed over)
        self.plays = 0
        self.phase_hosts: dict[str, HostOutcome] = {}
        self.error: BaseException | None = None  # raised by on_phase: the playbook is cancelled, then it is raised

    def end_phase(self) -> None:
        """The current phase is over: hand its outcomes to on_phase (once)."""
        if self.on_phase is None or self.phase < 0 or self.error is not None:
            return
        phase, self.phase = self.phase, -1
        try:
            self.on_phase(phase, self.phase_hosts)
        except BaseException as exc:  # noqa: BLE001 - raised again once ansible-playbook has been stopped
            self.error = exc

    def handle(self, event: dict[str, Any]) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data", {})
        host = data.get("host")
        if kind == "playbook_on_play_start":
            self.play = data.get("play", "")
            if self.on_phase is not None:
                self.end_phase()
                self.phase, self.phase_hosts, self.plays = self.plays, {}, self.plays + 1
        if host is None:
            return False
        outcome = self.hosts.setdefault(host, HostOutcome(host))
        phased = self.phase_hosts.setdefault(host, HostOutcome(host)) if self.on_phase is not None else None
        archives: list[bytes] = []
        res = _take_archives(data.get("res", {}), archives)
        start_at = (res.get("ansible_facts") or {}).get(START_FACT) if kind == "runner_on_ok" else None
        if self.on_start is not None and start_at is not None:
            self.on_start(float(start_at))
        for each in (outcome, phased) if phased is not None else (outcome,):
            each.archives += archives
            _apply(each, kind, data, res)
        return False  # nothing is kept on disk: the private data dir is thrown away

    def table(self) -> Table:
        elapsed = time.monotonic() - self.started
        table = Table(
            title=f"{self.title} — {self.play} ({elapsed:.0f} s)",
            title_justify="left",
            caption=self.status() if self.status else None,
            caption_justify="left",
            expand=False,
            show_edge=False,
        )
        for column in ("host", "task", "ok", "changed", "state"):
            table.add_column(column)
        for outcome in self.hosts.values():
            style = {"ok": "green", "failed": "red", "unreachable": "red"}[outcome.state]
            table.add_row(
                outcome.host, outcome.task[:60], str(outcome.ok), str(outcome.changed), f"[{style}]{outcome.state}[/]"
            )
        return table


class CtrlC:
    """While a playbook (or a round of iolab.drive.fanout) runs, Ctrl-C (or SIGTERM) asks it to cancel instead of
    raising mid-way."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, cancellable: bool, console: Console):
        self.pressed: int | None = None  # the signal received
        self.cancellable = cancellable
        self.console = console

    def __enter__(self) -> CtrlC:
        if threading_is_main():
            self.previous = {sig: signal.signal(sig, self._on_signal) for sig in self.SIGNALS}
        return self

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.pressed = signum
        if not self.cancellable:
            name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
            self.console.print(f"[yellow]{name}: finishing the clean-up first (unmounting); please wait[/]")

    def __exit__(self, *_: Any) -> None:
        if threading_is_main():
            for sig, handler in self.previous.items():
                signal.signal(sig, handler)
        if self.pressed and self.cancellable:
            raise Terminated if self.pressed == signal.SIGTERM else KeyboardInterrupt


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _project(private: Path, phases: list[Phase]) -> str:
    """A playbook importing each phase with its own variables."""
    plays = [
        {"import_playbook": str(paths.PLAYBOOKS / p.playbook), **({"vars": p.vars} if p.vars else {})} for p in phases
    ]
    path = private / "project" / "iolab.yml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(plays, sort_keys=False))
    return path.name


# The common start a run's hosts are given (roles/iolab_host's sync_start sets it, once for the play): run()'s
# `on_start` hears it (the clock of a faulted run's faults, iolab.drive.injector).
START_FACT = "iolab_host_start_at"
ENV_MARK = "IOLAB_PLAYBOOK"  # in the environment of each ansible-playbook process: its call's private directory


def _playbook_tree(private: Path) -> dict[int, int]:
    """The processes (PID → start time) of the ansible-playbook this process started for `private` (its
    environment says so): it and every descendant, its workers above all. Each worker calls setsid(), so
    ansible-runner's cancel, a SIGKILL to ansible-playbook's process group, would leave them running, orphaned,
    with the task they run (a module, and the command it started, holding the storage)."""
    mark = f"{ENV_MARK}={private}".encode()
    members: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        try:
            ours = (
                entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid()
            )
            if ours and mark in (entry / "environ").read_bytes().split(b"\0"):
                tree = ToolTree(int(entry.name))
                tree.cpu_seconds()
                members.update(tree.members())
        except (OSError, IndexError, ValueError):
            continue
    return members


def _envvars(private: Path) -> dict[str, str]:
    """ansible-playbook's environment: this virtualenv's tools, iolab's configuration and roles, and the mark of
    this call (ENV_MARK) that finds its processes when it is cancelled."""
    return {
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_CONFIG": str(paths.ANSIBLE_CFG),
        "ANSIBLE_ROLES_PATH": str(paths.ROLES),
        "ANSIBLE_NOCOLOR": "1",
        # ansible-runner's callback empties an event's result when its repr is over MAX_EVENT_RES characters
        # (700,000 by default): a returned archive (base64, in the task's stdout and again in stdout_lines) over
        # ≈ 260 KB was dropped without a word, and collect.yml then found nothing to fetch.
        "MAX_EVENT_RES": str(3 * INLINE_MAX + (2 << 20)),
        ENV_MARK: str(private),
    }


def _live(progress: _Progress, console: Console) -> Live | None:
    """The live table of the hosts, on a terminal; none elsewhere."""
    if not console.is_terminal:
        return None
    return Live(progress.table(), console=console, refresh_per_second=4, transient=False, get_renderable=progress.table)


# Playbooks this process started: a command interrupted before its first had nothing to tear down.
plays_started = 0


def run(
    phases: Phase | list[Phase],
    inventory: Path,
    hosts: list[str],
    extravars: dict[str, Any] | None = None,
    title: str = "",
    console: Console | None = None,
    cancellable: bool = True,
    status: Callable[[], str] | None = None,
    on_phase: Callable[[int, dict[str, HostOutcome]], None] | None = None,
    on_start: Callable[[float], None] | None = None,
) -> Result:
    """Run the phases on `hosts` (exact inventory names) and return each host's outcome.

    `on_start(epoch)`: called with each common start time a play gives its hosts (START_FACT), as it is chosen.

    `on_phase(index, outcomes)`: called as each phase ends (the next one starting, or the playbook
    ending other than by Ctrl-C), with that phase's own outcomes per host (a host left out of it by an
    earlier failure has none), while the playbook goes on. What it raises stops the playbook, and is
    raised here.

    On a terminal a live table shows each host's task, with `status()` (a campaign's
    progress) as its caption.

    Raises KeyboardInterrupt after the playbook was cancelled by Ctrl-C (when
    `cancellable`); otherwise Ctrl-C is deferred until the playbook ends.
    """
    global plays_started

    plays_started += 1
    phases = [phases] if isinstance(phases, Phase) else phases
    console = console or Console(stderr=True)
    progress = _Progress(title or ", ".join(p.playbook for p in phases), hosts, console, status, on_phase, on_start)
    private = Path(tempfile.mkdtemp(prefix="iolab-runner-"))
    try:
        playbook = _project(private, phases)
        runner = _play(private, playbook, inventory, hosts, extravars, progress, console, cancellable)
        if runner.status != "canceled":
            progress.end_phase()  # the last one
        if progress.error is not None:
            raise progress.error
        log = runner.stdout.read() if runner.stdout else ""
        return Result(
            status=runner.status, rc=runner.rc if runner.rc is not None else -1, hosts=progress.hosts, log=log
        )
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _play(
    private: Path,
    playbook: str,
    inventory: Path,
    hosts: list[str],
    extravars: dict[str, Any] | None,
    progress: _Progress,
    console: Console,
    cancellable: bool,
) -> Any:
    """ansible-runner on the playbook of the project in `private`, with the live table on a terminal; on Ctrl-C
    (when `cancellable`) or an error of `progress` the playbook is cancelled and its processes ended."""
    import ansible_runner

    cancelled: dict[int, int] = {}  # the playbook's processes when it was cancelled: ended once it has been

    def cancel() -> bool:
        if ctrl_c.pressed and ctrl_c.cancellable or progress.error is not None:
            cancelled.update(_playbook_tree(private))
            return True
        return False

    live = _live(progress, console)
    with CtrlC(cancellable, console) as ctrl_c:
        if live:
            live.start()
        try:
            return ansible_runner.run(
                private_data_dir=str(private),
                playbook=playbook,
                inventory=str(Path(inventory).resolve()),
                limit=",".join(hosts),
                extravars=extravars or {},
                envvars=_envvars(private),
                quiet=True,
                event_handler=progress.handle,
                cancel_callback=cancel,
                settings={"suppress_ansible_output": True},
                suppress_env_files=True,
            )
        finally:
            if live:
                live.stop()
            end_processes(cancelled)  # its workers, and what they ran here (on a host over SSH: `hostrun stop`)
