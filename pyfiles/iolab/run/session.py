"""A backend's life in a campaign: provision, mount, data set, the batches of runs, unmount; teardown on failure.

`BackendSession` is a context manager: entered, it queues the mount (and the data set) to play
first in the backend's next playbook; exited, however it ends (a failure, Ctrl-C), it tears down
what its playbooks did not unmount and check. Where its hosts stand (mounted, without the data set, to tear
down) is its `standing` (iolab.run.standing), the warm-ups before a run its `warming` (iolab.run.warming); the
hosts left out of the rest of the campaign, and why, are the campaign's (`CampaignState.lost`).
The campaign loop (iolab.run.bench) and the accelerator search (iolab.run.accelerators) both use it.

Runs alike (no warm-up, no search) on the same hosts play one after the other in one
ansible-playbook process (execute.play_runs), with the steps waiting (provisioning, the mount,
the data set) before them and the unmount after the backend's last; the session hears each
step's and each run's end as the playbook goes on (it is play_runs's `Listener`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Iterator

from iolab.campaign.model import Campaign, Run
from iolab.drive import datasets, injector, runner
from iolab.drive.execute import Lab, Queued, Step, left_behind, play_run, play_runs, run_phase, storage_phase, tear_down
from iolab.errors import RunFailed, UserError
from iolab.measures.samples import ResultStore, Sample
from iolab.progress import Planned, Progress
from iolab.run import warming
from iolab.run.plan import Entry
from iolab.run.standing import Standing
from iolab.run.warming import Warming
from iolab.store.record import headline, record_run, store_run


@dataclasses.dataclass
class CampaignState:
    """What the backend sessions of one campaign share, from backend to backend."""

    campaign: Campaign
    lab: Lab
    store: ResultStore
    progress: Progress
    planned: int = 0  # runs planned (the titles' "run 3/18")
    plans: dict[str, Planned] = dataclasses.field(default_factory=dict)  # each run as Progress starts it
    lost: dict[str, str] = dataclasses.field(default_factory=dict)  # hosts left out of the rest, and why
    unprovisioned: set[str] = dataclasses.field(default_factory=set)  # lost before anything was mounted on them
    counter: Iterator[int] = dataclasses.field(default_factory=lambda: itertools.count(1))
    # Steps waiting for the next playbook (provisioning, a mount): each playbook's start is paid once for them.
    ahead: list[Step] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.ahead.append(Step("setup", runner.Phase("setup.yml", self.campaign.setup_vars())))

    def take(self) -> list[Step]:
        """The steps waiting, for the playbook about to start (none wait after it)."""
        steps, self.ahead[:] = list(self.ahead), []
        return steps

    def title(self, run: Run, number: int | None = None) -> str:
        """'run 3/18: seq-read on tmpfs, rep 3' (the next number, or `number`), or 'extra run: …' past the plan."""
        number = next(self.counter) if number is None else number
        return f"run {number}/{self.planned}: {run.label()}" if number <= self.planned else f"extra run: {run.label()}"

    def provisioned(self, outcomes: dict[str, runner.HostOutcome]) -> dict[str, str]:
        """Provisioning ended: a host that failed is left out (skip), or stops the campaign (abort; or when
        every host failed)."""
        hosts = self.lab.hosts
        if not outcomes:
            raise RunFailed("provisioning the hosts failed: the playbook stopped before it ended (see its output)")
        failed = [o for o in outcomes.values() if o.failed or o.unreachable]
        self.unprovisioned.update(o.host for o in failed)  # nothing to tear down there, even if this stops all
        if failed and (self.campaign.on_host_failure == "abort" or len(failed) == len(hosts)):
            raise RunFailed(
                f"provisioning failed ({'on_host_failure: abort' if len(failed) < len(hosts) else 'on every host'}): "
                + "; ".join(o.describe() for o in failed)
            )
        for outcome in failed:
            self.lost[outcome.host] = outcome.describe().split(": ", 1)[1]
            self.lab.console.print(f"[yellow]{outcome.host} left out:[/] {self.lost[outcome.host]}")
        return {o.host: f"provisioning failed: {self.lost[o.host]}" for o in failed}


@dataclasses.dataclass
class _Batch:
    """Runs alike playing in one playbook: on which hosts, and each one's title."""

    runs: list[Run]
    hosts: list[str]
    titles: dict[str, str]


class BackendSession:
    """One backend mounted for a campaign (see the module's docstring); `failures` as sentences."""

    def __init__(self, state: CampaignState, backend: str, hosts: list[str], runs: list[Run]):
        self.state, self.backend, self.runs = state, backend, runs
        self.hosts = hosts  # the hosts that run something on it
        self.standing = Standing(backend, state.store, state.lost, state.lab.console)  # mounted, data set, teardown
        self.failures: list[str] = []
        self.warming = Warming(state.lab, state.store)  # the points warmed on this mount, the run just run
        self.batch: _Batch | None = None  # the runs alike playing now
        self.waiting: list[Step] = []  # the steps that waited before this backend's
        self.steps_alone = False  # the steps waiting play alone, not with runs
        self.holds_data = False  # the backend holds the campaign's data set (a faulted run checks it after)

    def __enter__(self) -> BackendSession:
        state, lab = self.state, self.state.lab
        if state.ahead and self.hosts != lab.hosts:  # provisioning is played on every host
            self.flush("setup", lab.hosts)
            self.hosts = [h for h in self.hosts if h not in state.lost]
        self.standing.mounted, self.standing.teardown = list(self.hosts), list(self.hosts)
        self.waiting = list(state.ahead)  # if nothing of this backend is played, they wait for the next
        state.ahead.append(Step("mount", storage_phase(state.campaign, self.backend, "mounted")))
        self.holds_data = datasets.held(state.campaign, self.runs)
        if datasets.needed(state.campaign, self.runs):
            state.ahead.append(Step("dataset", datasets.phase(state.campaign, self.backend)))
            # A host without the data set still runs the others: the data set is made before them, alone.
            self.steps_alone = not all(r.workload.uses_dataset for r in self.runs)
        return self

    def __exit__(self, *_: object) -> None:
        """Tear down what no playbook unmounted and checked (after a failure, Ctrl-C, or a host lost)."""
        state = self.state
        if state.ahead:  # nothing of this backend was played: nothing to tear down
            state.ahead[:], self.standing.teardown = self.waiting, []
        hosts = [h for h in self.standing.teardown if h not in state.unprovisioned]
        if hosts:
            self.failures += tear_down(state.lab, state.campaign, self.backend, hosts)

    # --- what plays ------------------------------------------------------------------------------

    def flush(self, title: str | None = None, hosts: list[str] | None = None) -> None:
        """Play the steps waiting, alone (on no host when none is left to the backend: it has nothing to run)."""
        steps, hosts = self.state.take(), hosts or self.hosts
        if steps and hosts:
            play_runs(self.state.lab, title or f"mount {self.backend}", hosts, self, before=steps)

    def play(self, queue: list[Entry], last: bool) -> None:
        """Run `queue` (no search among it): runs alike on the same hosts in one playbook, each run that needs
        a warm-up alone after it; `last`: nothing follows on this mount, the unmount plays with the last runs."""
        pending = list(queue)
        while pending:
            run, hosts = pending.pop(0)
            active = self.admit(run, hosts, batched=not _alone(run))
            if not active:
                continue
            if _alone(run):
                self._play_warmed(run, active)
                continue
            batch = [run]  # runs alike on the same hosts after it: one ansible-playbook process for them all
            while pending and not _alone(pending[0].run) and self.standing.active(*pending[0]) == active:
                entry = pending.pop(0)
                self.failures += self.standing.left_out(*entry)
                batch.append(entry.run)
            self._play_batch(batch, active, unmount=last and not pending)

    def admit(self, run: Run, hosts: list[str], batched: bool) -> list[str]:
        """Before `run`: the steps waiting play (alone, unless they go with `run`: batched on all the hosts);
        its hosts that cannot run it are recorded as left out. Return those that run it."""
        standing = self.standing
        together = batched and set(standing.active(run, hosts)) == set(self.hosts)
        if self.state.ahead and (self.steps_alone or not together):
            self.flush()  # the steps waiting play on every host, alone
        active = standing.active(run, hosts)
        self.failures += standing.left_out(run, hosts)
        if not active:
            self.state.progress.drop(run.run_id)
        return active

    def start(self, run: Run) -> str:
        """A run played alone starts: its title."""
        self.state.progress.start(self.state.plans[run.run_id])
        return self.state.title(run)

    def measure(
        self,
        run: Run,
        title: str,
        hosts: list[str],
        *,
        complete: bool = True,
        warm_command: bool = False,
        warmed_by: str | None = None,
    ) -> tuple[list[str], list[Sample], runner.Result]:
        """Play `run` alone on `hosts` and record it: its failures, its samples stored, and the playbook's result.

        A faulted run plays under its faults' schedule (iolab.drive.injector), then the check that it lost nothing; one
        whose fault was not injected or never fired is failed; a fault whose heal failed ends the campaign
        (RunFailed) once the run is recorded."""
        lab, raw = self.state.lab, self.state.store.raw_dir(run.run_id)
        phases = [run_phase(run, warm_command)]
        with injector.Schedule(lab, run, hosts, raw) if run.workload.faults else contextlib.nullcontext() as faults:
            if faults:
                holding = [h for h in hosts if h not in self.standing.no_data]
                phases.append(injector.check_phase(run, holding, self.holds_data))
            result = play_run(lab, phases, run, raw, title, hosts)
        failed = result.failed_hosts() if result else None
        if faults:  # a fault not injected, or that never fired: the run measured none, a failed run (injector)
            failed = faults.failing(failed)
        failures, stored = record_run(self.state.store, run, failed, hosts, complete=complete, warmed_by=warmed_by)
        if faults and faults.left:
            raise RunFailed(
                f"{faults.left[0]}" + (f" (and {len(faults.left) - 1} more)" if len(faults.left) > 1 else "")
            )
        return failures, stored, result

    def finish(
        self,
        run: Run,
        title: str,
        hosts: list[str],
        failures: list[str],
        stored: list[Sample],
        result: runner.Result | None,
    ) -> None:
        """A run played alone ended: its failures kept, the hosts it found unreachable left out, its line."""
        self.failures += failures
        self.warming.previous = (run, hosts, not failures)
        self.standing.lose_unreachable(result, title)
        self.state.progress.finish(title, headline(stored, failures, run.on(self.state.lab.hosts)))

    def search(self, run: Run, hosts: list[str], probe: Callable[[list[str], str], list[Sample]]) -> None:
        """A search (iolab.run.accelerators, iolab.run.kvcache_search) played alone on the mounted backend: `probe(its
        hosts, its title)` runs the probes, each a run of its own (`measure`), and gives the answer's samples,
        stored as the search's run; a RunFailed is the run's failure on each of its hosts."""
        active = self.admit(run, hosts, batched=False)
        if not active:
            return
        title = self.start(run)
        samples: list[Sample] = []
        why = None
        try:
            samples = probe(active, title)
        except RunFailed as exc:
            why = str(exc)
        self.finish(run, title, active, [f"{run.label()}: {why}"] if why else [], samples, None)
        store_run(self.state.store, run, samples, dict.fromkeys(active, why))

    def _play_warmed(self, run: Run, hosts: list[str]) -> None:
        title = self.start(run)
        warmed_by = self.warming.warm(run, hosts)
        warm_command = bool(run.cache_pass == "warm" and run.workload.warm_command)
        failures, stored, result = self.measure(
            run,
            title,
            hosts,
            complete=hosts == run.on(self.state.lab.hosts),
            warm_command=warm_command,
            warmed_by=warmed_by,
        )
        self.finish(run, title, hosts, failures, stored, result)

    def _play_batch(self, runs: list[Run], hosts: list[str], unmount: bool) -> None:
        """Runs alike on the same mounted hosts, in one playbook, each recorded as soon as it ends (run_ended);
        the steps waiting (provisioning, mount) play first, and the unmount (when asked) last."""
        state = self.state
        numbers = [next(state.counter) for _ in runs]
        titles = {run.run_id: state.title(run, number) for number, run in zip(numbers, runs, strict=True)}
        which = f"run {numbers[0]}" if len(runs) == 1 else f"runs {numbers[0]}–{numbers[-1]}"
        title = f"{which}/{state.planned} on {self.backend}, one playbook"
        self.batch = _Batch(runs, hosts, titles)
        self.warming.previous = (runs[-1], hosts, False)  # until its run ends well
        after = [Step("unmount", storage_phase(state.campaign, self.backend, "unmounted"))] if unmount else []
        try:
            play_runs(
                state.lab,
                title,
                hosts,
                self,
                before=state.take(),
                runs=[Queued(run, state.store.raw_dir(run.run_id), titles[run.run_id]) for run in runs],
                after=after,
            )
        finally:
            self.batch = None

    # --- what play_runs tells (execute.Listener) -------------------------------------------------

    def step_ended(self, step: Step, outcomes: dict[str, runner.HostOutcome]) -> dict[str, str]:
        """A step of a playbook ended: return the hosts it leaves out of what follows, and why."""
        if step.kind == "setup":
            return self.state.provisioned(outcomes)
        if step.kind == "mount":
            return self.standing.mount_ended(outcomes)
        if step.kind == "dataset":
            return self.standing.data_ended(outcomes)
        self.failures += left_behind(self.state.lab, self.backend, outcomes.values())  # as tear_down says it
        self.standing.unmounted(outcomes)
        return {}

    def run_started(self, run: Run) -> None:
        self.state.progress.start(self.state.plans[run.run_id])

    def run_ended(self, run: Run, result: runner.Result) -> None:
        """A run of the batch playing ended: record it now."""
        state, batch = self.state, self.batch
        assert batch is not None
        failures, stored = record_run(
            state.store, run, result.failed_hosts(), batch.hosts, complete=batch.hosts == run.on(state.lab.hosts)
        )
        self.failures += failures
        if run is batch.runs[-1]:
            self.warming.previous = (run, batch.hosts, not failures)
        self.standing.lose_unreachable(result, batch.titles[run.run_id])
        state.progress.finish(batch.titles[run.run_id], headline(stored, failures, run.on(state.lab.hosts)), run.run_id)


def _alone(run: Run) -> bool:
    """A run played in a playbook of its own: one that is warmed first, or one with faults (its clock, the checks
    after it and the cluster's healing stay its own)."""
    return warming.needed(run) or bool(run.workload.faults)


def by_hand(spec: Campaign, backend: str, state: str, source: str) -> list[runner.Phase]:
    """storage.mount (`state` kept: mounted, and left so) and storage.unmount (absent: its tools stopped too) of
    a backend of `spec` (read from `source`): provisioning, then the storage phase. A backend not in it is refused."""
    names = [b.name for b in spec.backends]
    if backend not in names:
        raise UserError(f"backend {backend!r} is not in {source} (it has: {', '.join(names)}); pass --backend NAME")
    return [runner.Phase("setup.yml"), storage_phase(spec, backend, state, stop_tools=state == "absent")]


def by_hand_done(spec: Campaign, backend: str, state: str, result: runner.Result, hosts: int) -> str:
    """What storage.mount or storage.unmount did, in a line; RunFailed where it failed."""
    if result.failures() or result.status != "successful":
        raise RunFailed(f"{backend} {state}: {result.summary()}")
    target = next(b.target for b in spec.backends if b.name == backend)
    return f"{backend} {'mounted' if state == 'kept' else 'unmounted'} on {hosts} host(s) at {target}"
