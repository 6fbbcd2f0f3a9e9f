"""Running phases on the hosts: the lab a command drives, the playbook phases of a run, its files brought back.

A run's phases go to the hosts through iolab.drive.runner (ansible-runner); each host returns
its run's files in its own output (iolab.host.hostrun), unpacked here under
results/<campaign>/raw/<run_id>/<host>/. What a command leaves on a host lies under
HOST_DIR/runs/OWNER/<host>/, and its teardown removes only that (`tear_down`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

from rich.console import Console

from iolab import paths
from iolab.campaign.hosts import Inventory
from iolab.campaign.model import Campaign, Run
from iolab.drive import fanout, fanout_run, live, live_metrics, release, runner, steps, unpack
from iolab.errors import RunFailed
from iolab.kinds import hostcall
from iolab.workloads.base import HostCall, Play

HOST_DIR = "/opt/iolab"
HOST_PYTHON = f"{HOST_DIR}/venv/bin/python"  # made by the iolab_host role
# What this command leaves on a host lies under HOST_DIR/runs/OWNER/<host>/: the controller, this process
# and its start, so two campaigns (two labs' hosts of one name on one file system) never share a directory
# and teardown removes only its own. The host lease records it for a takeover after a crash (iolab.drive.lease).
OWNER = f"{socket.gethostname()}-{os.getpid()}-{time.time_ns() // 1_000_000}"
# What teardowns of this command left on a host, one line each (iolab.run.cli says teardown is done only
# when a teardown added none), and on which hosts (iolab.drive.lease keeps their lease records for the next command).
teardown_left: list[str] = []
untorn: set[str] = set()


@dataclasses.dataclass
class Lab:
    """The hosts a command works on, and how to reach them through Ansible."""

    inventory: Inventory
    hosts: list[str]
    console: Console
    status: Callable[[], str] | None = None  # a campaign's progress, shown under the live table
    live: Callable[[], str] | None = None  # the running run's throughput (iolab.drive.live), beside it
    started: Callable[[float], None] | None = None  # told each run's common start (a faulted run's clock)
    released: set[str] = dataclasses.field(default_factory=set)  # hosts the lease found this release on

    def extravars(self) -> dict[str, Any]:
        # One release for the whole command: every phase runs the code the hosts were set up with.
        if not hasattr(self, "_release"):
            self._release = release.build()
        digest, archive = self._release
        return {
            "iolab_host_dir": HOST_DIR,
            "iolab_python": HOST_PYTHON,
            "iolab_owner": OWNER,
            "iolab_release": digest,
            "iolab_release_archive": str(archive),
            "iolab_host_release_here": sorted(self.released),  # roles/iolab_host skips its look for it there
        }

    def play(
        self,
        phases: runner.Phase | list[runner.Phase],
        title: str,
        hosts: list[str] | None = None,
        cancellable: bool = True,
        on_phase: Callable[[int, dict[str, runner.HostOutcome]], None] | None = None,
    ) -> runner.Result:
        return runner.run(
            phases,
            self.inventory.path,
            hosts or self.hosts,
            self.extravars(),
            title=title,
            console=self.console,
            cancellable=cancellable,
            status=self.caption,
            on_phase=on_phase,
            on_start=self.started,
        )

    def caption(self) -> str:
        """What the live table shows under the hosts: the campaign's progress and the run's throughput now."""
        return " · ".join(
            text for text in (self.status() if self.status else "", self.live() if self.live else "") if text
        )


def gather_facts(lab: Lab, dl: bool = False) -> Path:
    """Provision the hosts (idempotent; `dl`: the deep-learning stack too) and bring their provenance to
    results/facts/ (lab.setup, lab.facts); return that directory."""
    facts_dir = paths.results_root() / "facts"
    facts_dir.mkdir(parents=True, exist_ok=True)
    result = lab.play(
        runner.Phase("setup.yml", {"iolab_host_facts_dest": str(facts_dir), "iolab_host_dl": dl}), "lab.setup"
    )
    if result.failures() or result.status != "successful":
        raise RunFailed(f"lab.setup failed: {result.summary()}")
    return facts_dir


# --- phases: what the controller asks of the playbooks ---------------------------------------


def storage_phase(campaign: Campaign, backend_name: str, state: str, stop_tools: bool = False) -> runner.Phase:
    """The storage phase for one backend; `state` is its role's: mounted, kept, unmounted or absent."""
    backend = next(b for b in campaign.backends if b.name == backend_name)
    return runner.Phase(
        "storage.yml",
        {
            "storage_role": backend.role,
            "storage_stop_tools": stop_tools,
            "storage_target": backend.target,
            "storage_mount_root": campaign.mount_root,
            "storage_existing": not hasattr(backend, "mountpoint"),
            **backend.role_vars(state, campaign.dataset, campaign.dataset_formats),
        },
    )


def workload_vars(run: Run) -> dict[str, Any]:
    """The bench role of the run's tool, and the role's variables (as the backend needs them)."""
    variables = {**run.workload.role_vars(run.backend.target), **run.workload.repetition_vars(run.repetition)}
    if run.workload.uses_dataset:  # each host's own copy, or the one a read-only backend holds
        variables.update(run.workload.dataset_vars(run.backend.shared_dataset_root))
    return {"run_role": f"bench_{run.workload.tool}", **run.backend.run_vars(run.workload, variables)}


def fan_vars(run: Run) -> dict[str, Any]:
    """What decides whether a run of a playbook of several can go through ClusterShell (iolab.drive.fanout.refusal),
    and the fio role's variables it is run with there."""
    return {**workload_vars(run), **run.backend.storage_side()}


def run_phase(run: Run, warm_command: bool = False) -> runner.Phase:
    """Run `run` on the hosts (caches dropped as its cache policy says); each host returns its files packed.

    `warm_command`: run the workload's warm_command on each host first (the warm run of cache: warm), bounded
    by the run's timeout (its bench role's `bench_<tool>_timeout`, in s).
    """
    variables = workload_vars(run)
    warm = {
        "run_warm_command": run.workload.warm_command,
        "run_target": run.backend.target,
        "run_warm_timeout": variables[f"{variables['run_role']}_timeout"],
    }
    return runner.Phase(
        "run.yml",
        {
            "iolab_run_id": run.run_id,
            "run_drop_caches": run.drop_caches,
            "run_profilers": run.workload.profilers,
            **(warm if warm_command else {}),
            **variables,
            **run.backend.storage_side(),
        },
    )


def play_run(
    lab: Lab, phases: list[runner.Phase], run: Run, raw_dir: Path, title: str, hosts: list[str]
) -> runner.Result:
    """Play `phases` (run_phase(run) among them) on `hosts`, then put each host's files in raw_dir/<host>/. The
    run's own phase alone (a search's probe, a cache pass; its warm-up command first, the check after a faulted run),
    where it can (iolab.drive.fanout.refusal), goes through ClusterShell as a batch's runs go (fan_run).

    A host's run returns its files in its own output (iolab.host.hostrun), a failed run
    its failure record with them; a run whose files were too large for that leaves
    them for collect.yml to fetch. A host whose files cannot be fetched or read fails.
    """
    checks = [phase.vars for phase in phases[1:] if phase.playbook == "intact.yml"]
    own, warmed = run_phase(run), run_phase(run, warm_command=True)
    warm = phases[0] == warmed != own  # its warm-up command first
    with _Watch(lab, hosts, run):
        if (warm or phases[0] == own) and len(checks) == len(phases) - 1 and fanned(lab, hosts, run):
            engine = fanout.Engine(lab.inventory, hosts, lab.console)  # the run alone, as a batch's runs go
            try:
                result = runner.Result("successful", 0, fan_run(lab, engine, run, hosts, checks, warm), "")
            finally:
                engine.close()
        else:
            result = lab.play(phases, title, hosts=hosts)
    return _fetch(lab, result, run, raw_dir, title, unpack.unpack(result, raw_dir, hosts))


def fanned(lab: Lab, hosts: list[str], run: Run) -> bool:
    """Whether `run` goes through ClusterShell on `hosts` (iolab.drive.fanout.refusal)."""
    return not fanout.refusal(lab.inventory, hosts, fan_vars(run))


def fan_run(
    lab: Lab,
    engine: fanout.Engine,
    run: Run,
    hosts: list[str],
    checks: list[dict[str, Any]] | None = None,
    warm: bool = False,
) -> dict[str, runner.HostOutcome]:
    """`run` on `hosts` through ClusterShell (iolab.drive.fanout_run), after its warm-up command (`warm`: a host it
    fails on is failed), on the clock a faulted run's faults keep (Lab.started), then the `checks` after a faulted
    run (injector.check_phase's variables): each host's outcome, its archives among them."""
    release = lab.extravars()["iolab_release"]
    variables = fan_vars(run)
    env = ["env", f"PYTHONPATH={HOST_DIR}/releases/{release}", "IOLAB_PACK_RUN=1", "IOLAB_LAUNCHER=clustershell"]
    env.append(f"IOLAB_PROFILERS={','.join(run.workload.profilers)}")
    dirs = {h: f"{HOST_DIR}/runs/{OWNER}/{h}/{run.run_id}" for h in hosts}
    timeout = float(variables[f"{variables['run_role']}_timeout"])  # its bench role's, in s
    warm_argv, target = run.workload.warm_command or [], run.backend.target
    warm_env = [*env, *(f"{k}={v}" for k, v in variables.get("run_environment", {}).items())]  # as run.yml's play
    warmed = fanout_run.warm(engine, warm_env, HOST_PYTHON, dirs, warm_argv, target, timeout) if warm else {}
    calls = _calls(lab, hosts, run, variables, dirs) if hosts else {}
    calls = {h: c for h, c in calls.items() if h not in warmed}  # hosts whose warm-up failed: failed runs
    calls, storage = fanout_run.storage_side(lab.inventory, variables, run.drop_caches, env, calls)
    outcomes = fanout_run.run_calls(engine, env, dirs, calls, timeout, storage, lab.started) if calls else {}
    outcomes.update(warmed)
    for check in checks or []:
        fanout_run.intact(engine, env, HOST_PYTHON, outcomes, check)
    return outcomes


@dataclasses.dataclass(frozen=True)
class Step:
    """A phase played in one playbook with runs, before or after them: provisioning (`setup`), a `mount`, the
    `dataset`, an `unmount`. Its listener is told its own outcomes per host as it ends (a host left out of it
    by an earlier failure has none; a phase the playbook never reached gets {}), and says which hosts it leaves
    out of what follows, and why; what the listener raises stops the playbook."""

    kind: Literal["setup", "mount", "dataset", "unmount"]
    phase: runner.Phase


class Queued(NamedTuple):
    """A run in a playbook of several: the run, its raw directory and its title."""

    run: Run
    raw_dir: Path
    title: str


class Listener(Protocol):
    """What hears a playbook of steps and runs as it goes (iolab.run.session.BackendSession)."""

    def step_ended(self, step: Step, outcomes: dict[str, runner.HostOutcome]) -> dict[str, str]: ...

    def run_started(self, run: Run) -> None: ...

    def run_ended(self, run: Run, result: runner.Result) -> None: ...


def play_runs(
    lab: Lab,
    title: str,
    hosts: list[str],
    listener: Listener,
    before: list[Step] | None = None,
    runs: list[Queued] | None = None,
    after: list[Step] | None = None,
) -> None:
    """Play several runs on `hosts` in one ansible-playbook process, one run phase after the other, so that
    Ansible's start is paid once for them all, not once per run; the `before` steps first (provisioning,
    mount), the `after` steps last (unmount).

    As each step ends, `listener.step_ended` says which hosts it leaves out; as each run's phase ends (the
    next one already running), its files are put in its raw directory and `listener.run_ended` records it;
    `listener.run_started` as each begins. A run whose files must be fetched (collect.yml) is recorded once
    the playbook has ended. A host that failed outside a run's own rescue (or in a step), or became
    unreachable, is left out of the later runs by Ansible: they record it as failed, with why; so do the
    runs a playbook that stopped early never reached. Ctrl-C stops the playbook: the runs already ended are
    recorded, the one running is not.
    """
    plays: list[Step | Queued] = [*(before or []), *(runs or []), *(after or [])]
    if plays:
        _Playbook(lab, hosts, listener, plays).play(title)


class _Playbook:
    """One ansible-playbook process of steps and runs, each handed to the listener as its play ends."""

    def __init__(self, lab: Lab, hosts: list[str], listener: Listener, plays: list[Step | Queued]):
        self.lab, self.hosts, self.listener, self.plays = lab, hosts, listener, plays
        self.handed = 0  # plays handed over so far
        self.left_out: dict[str, str] = {}  # hosts a step or a run left out of the plays after it, and why
        self.deferred: list[tuple[Queued, runner.Result, list[str]]] = []  # runs whose files must be fetched
        first = next((play for play in plays if isinstance(play, Queued)), None)
        self.watch = _Watch(lab, hosts, first.run) if first else None

    def play(self, title: str) -> None:
        """Every play in one ansible-playbook process; or, when every run of them can (iolab.drive.fanout.refusal), the
        runs through ClusterShell and the steps before and after them in a playbook each."""
        queued = [i for i, play in enumerate(self.plays) if isinstance(play, Queued)]
        runs = [play.run for play in self.plays if isinstance(play, Queued)]
        fanned_all = bool(runs) and all(fanned(self.lab, self.hosts, run) for run in runs)
        try:
            with self.watch or contextlib.nullcontext():
                if not fanned_all:
                    self._ansible(0, len(self.plays), title)
                else:
                    engine = fanout.Engine(self.lab.inventory, self.hosts, self.lab.console)
                    try:
                        self._steps(engine, 0, queued[0], title)
                        self._fan(engine, queued[0], queued[-1] + 1)
                        self._steps(engine, queued[-1] + 1, len(self.plays), title)
                    finally:
                        engine.close()
        finally:
            for run, ended, fetch in self.deferred:
                self.listener.run_ended(run.run, _fetch(self.lab, ended, run.run, run.raw_dir, run.title, fetch))

    def _ansible(self, start: int, stop: int, title: str) -> None:
        """Play self.plays[start:stop] in one ansible-playbook process, on the hosts nothing left out before it."""
        if start == stop:
            return
        if start == 0 and isinstance(self.plays[0], Queued):
            self.listener.run_started(self.plays[0].run)
        hosts = [h for h in self.hosts if h not in self.left_out]
        phases = [play.phase if isinstance(play, Step) else run_phase(play.run) for play in self.plays[start:stop]]
        result = (
            self.lab.play(phases, title, hosts=hosts, on_phase=lambda index, o: self.ended(start + index, o))
            if hosts
            else runner.Result("failed", 1, {}, "no host left")
        )
        if self.handed < stop:
            # The playbook stopped before its end (every host had failed): what it never reached is handed
            # over with no outcomes, so that no run of it goes unrecorded.
            why = f"the playbook stopped before it: {result.summary()}"
            for host in self.hosts:
                self.left_out.setdefault(host, why)
            for index in range(self.handed, stop):
                self.ended(index, {})

    def _steps(self, engine: fanout.Engine, start: int, stop: int, title: str) -> None:
        """The steps self.plays[start:stop] around fanned-out runs, as host calls where they can be (iolab.drive.steps);
        from the first that cannot, the rest in one ansible-playbook process."""
        released, extra, hostvars = self.lab.released, self.lab.extravars(), self.lab.inventory.hostvars
        for index, phase in enumerate(_step_phases(self.plays[start:stop]), start):
            hosts = [h for h in self.hosts if h not in self.left_out]
            argvs = steps.calls(phase, hosts, released, extra, hostvars)
            outcomes = steps.play(engine, phase, argvs, hosts, extra, hostvars) if argvs is not None else None
            if outcomes is None:
                self._ansible(index, stop, title)
                return
            self.ended(index, outcomes)

    def _fan(self, engine: fanout.Engine, start: int, stop: int) -> None:
        """The runs self.plays[start:stop] through ClusterShell (drive.fanout), each handed over as it ends, on the
        hosts nothing left out before it."""
        for index in range(start, stop):
            play = self.plays[index]
            assert isinstance(play, Queued)
            if index == 0:
                self.listener.run_started(play.run)
            hosts = [h for h in self.hosts if h not in self.left_out]
            self.ended(index, fan_run(self.lab, engine, play.run, hosts))

    def ended(self, index: int, outcomes: dict[str, runner.HostOutcome]) -> None:
        """The play `index` ended with these outcomes of its own (runner.run's on_phase)."""
        self.handed = index + 1
        play = self.plays[index]
        if isinstance(play, Step):
            self.left_out.update(self.listener.step_ended(play, outcomes))
        else:
            self._run_ended(play, outcomes)
        following = self.plays[index + 1] if index + 1 < len(self.plays) else None
        if isinstance(following, Queued):
            assert self.watch is not None
            self.watch.follow(following.run)
            self.listener.run_started(following.run)

    def _run_ended(self, queued: Queued, outcomes: dict[str, runner.HostOutcome]) -> None:
        for host in self.hosts:
            if host not in outcomes:
                outcome = runner.HostOutcome(host, failed=True, task="(not started)")
                outcome.message = f"left out of this run: {self.left_out.get(host, 'it failed in an earlier run')}"
                outcomes[host] = outcome
            elif outcomes[host].unreachable or outcomes[host].failed:
                self.left_out[host] = f"{outcomes[host].describe()} (in {queued.title})"
        result = runner.Result("successful", 0, outcomes, "")
        fetch = unpack.unpack(result, queued.raw_dir, self.hosts)
        if fetch:
            self.deferred.append((queued, result, fetch))
        else:
            self.listener.run_ended(queued.run, result)


def _calls(
    lab: Lab, hosts: list[str], run: Run, variables: dict[str, Any], dirs: dict[str, str]
) -> dict[str, HostCall]:
    """Each host's call for `run` (iolab.kinds.hostcall), from `variables`, those its bench role would get
    (fan_vars)."""
    play = Play.of(hosts, run.run_id, lab.inventory.hostvars, dirs)
    kind = hostcall.kind_vars(variables)
    role = variables["run_role"]
    return {h: hostcall.host_call(role, HOST_PYTHON, h, dirs[h], play, run.drop_caches, kind) for h in hosts}


def _step_phases(plays: list[Step | Queued]) -> list[runner.Phase]:  # (a span of steps, with no run in it)
    return [play.phase for play in plays if isinstance(play, Step)]


class _Watch:
    """The live throughput of the run that is running (iolab.drive.live), on a terminal, and to Prometheus where
    $IOLAB_LIVE_METRICS says (iolab.drive.live_metrics); nothing without either."""

    def __init__(self, lab: Lab, hosts: list[str], run: Run):
        self.lab, self.hosts = lab, hosts
        self.exporter = live_metrics.exporter()
        export = self.exporter.export if self.exporter else None
        wanted = lab.console.is_terminal or export is not None
        self.watch = live.Watch(lab.inventory, hosts, self._dirs(run), export=export) if wanted else None
        self._labels(run)

    def _labels(self, run: Run) -> None:
        if self.exporter is not None:
            self.exporter.follow(run.campaign, run.run_id, run.backend.name, run.workload.name)

    def _dirs(self, run: Run) -> dict[str, str]:
        return {host: f"{HOST_DIR}/runs/{OWNER}/{host}/{run.run_id}" for host in self.hosts}

    def follow(self, run: Run) -> None:
        if self.watch is not None:
            self.watch.run_dir = self._dirs(run)
            self.watch.figures.clear()
        self._labels(run)

    def __enter__(self) -> _Watch:
        if self.watch is not None:
            self.watch.__enter__()
            self.lab.live = self.watch.text
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        self.lab.live = None
        if self.watch is not None:
            self.watch.__exit__()
            self.watch = None
        if self.exporter is not None:
            self.exporter.clear()


def _fetch(lab: Lab, result: runner.Result, run: Run, raw_dir: Path, title: str, fetch: list[str]) -> runner.Result:
    """Fetch the files too large for the run's output (collect.yml) from `fetch`, into raw_dir/<host>/."""
    if not fetch:
        return result
    lab.console.print(
        f"{title}: fetching the run's files from {', '.join(fetch)} (over the size a run returns in its output)"
    )
    fetched = lab.play(
        runner.Phase("collect.yml", {"iolab_run_id": run.run_id, "iolab_collect_dest": str(raw_dir)}),
        f"collect: {title}",
        hosts=fetch,
        cancellable=False,
    )
    result.hosts.update({o.host: o for o in fetched.failures()})
    for host in fetch:
        fetched_archive = raw_dir / f"{host}.tar.gz"
        if fetched_archive.exists():
            with fetched_archive.open("rb") as data:
                unpack.extract(result, host, data, raw_dir / host)
            fetched_archive.unlink()
    return result


def tear_down(lab: Lab, campaign: Campaign, backend: str, hosts: list[str]) -> list[str]:
    """Stop this command's tools and remove its run files on `hosts`, unmount `backend`, and check that nothing
    of it is left (the roles probe the mount, iolab.host.hostrun the tools); what is left is said now (after
    Ctrl-C no summary follows) and kept in teardown_left."""
    unmount = lab.play(
        storage_phase(campaign, backend, "unmounted", stop_tools=True),
        f"unmount {backend}",
        hosts=hosts,
        cancellable=False,
    )
    return left_behind(lab, backend, unmount.failures())


def left_behind(lab: Lab, backend: str, outcomes: Iterable[runner.HostOutcome]) -> list[str]:
    """The hosts whose unmount of `backend` failed, said now and kept in teardown_left, as sentences."""
    failed = [o for o in outcomes if o.failed or o.unreachable]
    left = [f"unmounting {backend} failed: {o.describe()}" for o in failed]
    for line in left:
        lab.console.print(f"[red]{line}[/]")
    teardown_left.extend(left)
    untorn.update(o.host for o in failed)
    return left
