"""Run a campaign: for each backend mount, for each run drop caches → tool → collect, always unmount.

The campaign loop: which runs, on which hosts, in what order (resume, more repetitions
where repeats disagree, warm-ups), through iolab.execute (phases on the hosts) and
iolab.record (samples from the runs' files). What a run measured on each host becomes
samples as soon as the run ends, so an interruption loses nothing already gathered, and
a later call runs only what is missing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from iolab import datasets, runner, validity
from iolab.backends.base import DATASET_DIR
from iolab.backends.s3 import S3Backend
from iolab.campaign import Campaign, Run, expand, repetition
from iolab.errors import RunFailed, UserError
from iolab.execute import (
    Lab,
    left_behind,
    play_run,
    play_runs,
    run_phase,
    storage_phase,
    tear_down,
    workload_vars,
)
from iolab.progress import Planned, Progress
from iolab.record import headline, record_run, run_record
from iolab.samples import ResultStore
from iolab.shared import fio_options
from iolab.workloads.fio import FioWorkload
from iolab.workloads.pytorch import PytorchWorkload

# --- the campaign loop --------------------------------------------------------------------------


def start_over(store: ResultStore) -> Path | None:
    """--no-resume: keep the old results, moved aside, and start with an empty store."""
    if not store.dir.exists():
        return None
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    moved = store.dir.with_name(f"{store.dir.name}.{stamp}")
    shutil.move(store.dir, moved)
    return moved


def run_campaign(
    campaign: Campaign, lab: Lab, store: ResultStore, resume: bool = True, only_repetition: int | None = None
) -> list[str]:
    """Run what is missing of a campaign on the lab's hosts; return the failures.

    `only_repetition`: that repetition and no other (bench.fio: each call is one new
    repetition on the hosts it selects, not also the gaps earlier calls left on them).

    A host that fails or cannot be reached is left out of the rest of the campaign
    (or stops it, with on_host_failure: abort); its runs are recorded as failed and
    a later call runs exactly those (run, host) pairs again. Repeats that disagree
    get more repetitions, up to the campaign's max_repetitions.
    """
    console = lab.console
    if not resume:
        moved = start_over(store)
        if moved:
            console.print(f"--no-resume: earlier results kept in {moved}")
    for note in store.preflight():  # writable, with room, no torn line: before anything runs
        console.print(f"[yellow]{note}[/]")
    runs = [r for r in expand(campaign, len(lab.hosts)) if only_repetition in (None, r.repetition)]
    done = store.completed()
    plan = [(r, [h for h in r.on(lab.hosts) if (r.run_id, h) not in done]) for r in runs]
    plan = [(r, hosts) for r, hosts in plan if hosts]
    extra = campaign.max_repetitions is not None and campaign.max_repetitions > campaign.repetitions
    queues = {
        backend: [(r, hosts) for r, hosts in plan if r.backend.name == backend]
        + ([(r, r.on(lab.hosts)) for r in _more_repetitions(campaign, store, runs, backend)] if extra else [])
        for backend in dict.fromkeys(r.backend.name for r in runs)
    }  # extra: stored repeats that disagree
    queues = {backend: queue for backend, queue in queues.items() if queue}
    progress = Progress(_planned([r for queue in queues.values() for r, _ in queue]), console)
    console.print(
        f"campaign [bold]{campaign.name}[/]: {len(runs)} runs on {len(lab.hosts)} host(s), "
        f"{len(runs) - len(plan)} already stored, {len(plan)} to run"
        + (f" (and more repetitions, up to {campaign.max_repetitions}, where repeats disagree)" if extra else "")
        + (f"; {progress.status()}" if queues else ""),
        soft_wrap=True,
    )
    if not queues:
        return []
    lab.status = progress.status
    loop = _Loop(campaign, lab, store, runs, progress, len(plan), extra)
    loop.ahead.append(_provision(loop))  # played in the first playbook of the campaign
    failures: list[str] = []
    for backend, queue in queues.items():
        failures += _run_backend(loop, backend, queue)
    return failures


@dataclasses.dataclass
class _Loop:
    """What the campaign loop carries from backend to backend."""

    campaign: Campaign
    lab: Lab
    store: ResultStore
    runs: list[Run]  # the campaign's runs (more repetitions are counted from them)
    progress: Progress
    planned: int  # runs planned (the titles' "run 3/18")
    extra: bool  # more repetitions may follow where repeats disagree
    lost: dict[str, str] = dataclasses.field(default_factory=dict)  # hosts left out of the rest, and why
    unprovisioned: set[str] = dataclasses.field(default_factory=set)  # lost before anything was mounted on them
    counter: Iterator[int] = dataclasses.field(default_factory=lambda: itertools.count(1))
    # Steps waiting for the next playbook (provisioning, a mount): each playbook's start is paid once for them.
    ahead: list[runner.Step] = dataclasses.field(default_factory=list)

    def take(self) -> list[runner.Step]:
        """The steps waiting, for the playbook about to start (none wait after it)."""
        steps, self.ahead[:] = list(self.ahead), []
        return steps

    def flush(self, title: str, hosts: list[str]) -> None:
        """Play the steps waiting, alone."""
        steps = self.take()
        if steps:
            self.lab.play_steps(steps, title, hosts)


def _alike(run: Run) -> bool:
    """A run that plays as one run.yml phase among others (no warm-up before it, not a search)."""
    return not (_searches(run) or _needs_warming(run))


def _searches(run: Run) -> bool:
    """A run that is a search (iolab.accelerators), not one measurement."""
    return getattr(run.workload, "search", None) is not None


def _planned(runs: list[Run]) -> list[Planned]:
    """The runs as Progress plans them: runs of one workload take alike times; estimates as --dry-run's."""
    warmed: set[tuple] = set()
    return [Planned(run.run_id, run.workload.name, _run_estimate(run, warmed)[0]) for run in runs]


def _run_backend(loop: _Loop, backend: str, queue: list[tuple[Run, list[str]]]) -> list[str]:
    """Mount one backend, run its queue (and the extra repetitions disagreeing repeats earn), unmount.

    The mount (and the data set, when every run of the backend reads it) is played with the first runs,
    and the unmount with the last, in one playbook, when they are runs alike (execute.play_runs); a host
    whose mount fails is left out of the runs, recorded with why.
    """
    campaign, lab, store, lost, progress = loop.campaign, loop.lab, loop.store, loop.lost, loop.progress
    console = lab.console
    failures: list[str] = []
    need = [h for h in lab.hosts if h not in lost and any(h in hosts for _, hosts in queue)]
    if loop.ahead and need != lab.hosts:  # provisioning is played on every host
        loop.flush("setup", lab.hosts)
        need = [h for h in need if h not in lost]
    mounted = list(need)  # until the mount says otherwise
    teardown = list(need)  # every host the mount reached, even if Ctrl-C cut it short
    no_data: dict[str, str] = {}
    warmed: set[tuple] = set()  # points that had their warm-up run on this mount
    previous: tuple[Run, list[str], bool] | None = None  # the run just run, its hosts, whether it succeeded
    tried: set[str] = set()  # run ids run on this mount: an extra repetition that failed is not retried

    def mount_ended(outcomes: dict[str, runner.HostOutcome]) -> dict[str, str]:
        left: dict[str, str] = {}
        for host in list(mounted):
            outcome = outcomes.get(host)
            if outcome is not None and not (outcome.failed or outcome.unreachable):
                continue
            mounted.remove(host)
            if outcome is not None and outcome.unreachable:
                teardown.remove(host)
            if host not in lost:
                lost[host] = f"mounting {backend} failed: {outcome.message if outcome else 'the playbook stopped'}"
            left[host] = lost[host]
        return left

    def left_out(run: Run, hosts: list[str]) -> list[str]:
        """Record `run` as failed on those of its hosts that cannot run it: not mounted, or without the data set."""
        skipped = _skipped(store, run, [h for h in hosts if h not in mounted], lost)
        if run.workload.uses_dataset:
            skipped += _skipped(store, run, [h for h in hosts if h in mounted and h in no_data], no_data)
        return skipped

    def unmount_ended(outcomes: dict[str, runner.HostOutcome]) -> dict[str, str]:
        failures.extend(left_behind(lab, backend, outcomes.values()))  # as tear_down says it
        teardown[:] = [h for h in teardown if h not in outcomes]  # unmounted and checked, or what is left said
        return {}

    backend_runs = [r for r in loop.runs if r.backend.name == backend]
    waiting = list(loop.ahead)  # if nothing of this backend is played, they wait for the next
    loop.ahead.append(runner.Step(storage_phase(campaign, backend, "mounted"), mount_ended))
    if datasets.needed(campaign, backend_runs):
        loop.ahead.append(datasets.step(campaign, backend, mounted, no_data))
        if not all(r.workload.uses_dataset for r in backend_runs):  # a host without it still runs the others
            loop.flush(f"mount {backend}", need)
    try:
        while queue:
            pending = list(queue)
            while pending:
                run, hosts = pending.pop(0)
                alike = _alike(run)
                if loop.ahead and not (alike and set(_active(run, hosts, mounted, no_data)) == set(need)):
                    loop.flush(f"mount {backend}", need)  # the steps waiting play on every host, alone
                failures += left_out(run, hosts)
                active = _active(run, hosts, mounted, no_data)
                if not active:
                    progress.drop(run.run_id)
                    continue
                if alike:
                    # Runs alike on the same hosts after it: one ansible-playbook process for them all.
                    batch = [run]
                    while (
                        pending
                        and _alike(pending[0][0])
                        and _active(pending[0][0], pending[0][1], mounted, no_data) == active
                    ):
                        alike_run, its_hosts = pending.pop(0)
                        failures += left_out(alike_run, its_hosts)
                        batch.append(alike_run)
                    last = not pending and not loop.extra  # nothing can follow on this mount: unmount with them
                    unmount = storage_phase(campaign, backend, "unmounted") if last else None
                    ran, last_ok = _run_batch(loop, batch, active, mounted, teardown, unmount, unmount_ended)
                    failures += ran
                    previous = (batch[-1], active, last_ok)
                    continue
                title = _title(next(loop.counter), loop.planned, run)
                progress.start(_planned([run])[0])
                if _searches(run):
                    from iolab import accelerators

                    searching = run.workload
                    assert isinstance(searching, PytorchWorkload) and searching.accelerator  # as its schema asks
                    console.print(
                        f"{title}: searching the most {searching.accelerator.type} accelerators per "
                        f"host at AU ≥ {accelerators.THRESHOLD:g} % (up to {searching.accelerators})",
                        soft_wrap=True,
                    )
                    run_failures, stored = accelerators.fed(
                        lab, campaign, store, run, active, lambda line: console.print(line, soft_wrap=True)
                    )
                    result = None
                else:
                    warmed_by = _warm(lab, store, run, active, warmed, previous)
                    warm_command = bool(run.cache_pass == "warm" and run.workload.warm_command)
                    result = play_run(
                        lab, [run_phase(run, warm_command)], run, store.raw_dir(run.run_id), title, active
                    )
                    run_failures, stored = record_run(
                        store, run, result, active, complete=active == run.on(lab.hosts), warmed_by=warmed_by
                    )
                failures += run_failures
                previous = (run, active, not run_failures)
                _lose_unreachable(lab, result, title, lost, mounted, teardown)
                progress.finish(title, headline(stored, run_failures, run.on(lab.hosts)))
            tried.update(r.run_id for r, _ in queue)
            queue = [
                (r, r.on(lab.hosts))
                for r in _more_repetitions(campaign, store, loop.runs, backend)
                if r.run_id not in tried
            ]
    finally:
        if loop.ahead:  # nothing of this backend was played: nothing to tear down
            loop.ahead[:], teardown[:] = waiting, []
        teardown[:] = [h for h in teardown if h not in loop.unprovisioned]
        if teardown:
            failures += tear_down(lab, campaign, backend, teardown)
    return failures


def _title(number: int, planned: int, run: Run) -> str:
    """'run 3/18: seq-read on tmpfs, rep 3', or 'extra run: …' past the plan (more repetitions)."""
    return f"run {number}/{planned}: {run.label()}" if number <= planned else f"extra run: {run.label()}"


def _active(run: Run, hosts: list[str], mounted: list[str], no_data: dict[str, str]) -> list[str]:
    """The hosts of `hosts` that run `run`: mounted, and holding the data set if it reads one."""
    return [h for h in hosts if h in mounted and not (run.workload.uses_dataset and h in no_data)]


def _run_batch(
    loop: _Loop,
    batch: list[Run],
    hosts: list[str],
    mounted: list[str],
    teardown: list[str],
    unmount: runner.Phase | None,
    unmount_ended: Callable[[dict[str, runner.HostOutcome]], dict[str, str]],
) -> tuple[list[str], bool]:
    """Runs alike (no warm-up, no search) on the same mounted hosts, in one playbook (execute.play_runs),
    each recorded as soon as it ends; the steps waiting (provisioning, mount) play first, and `unmount`
    (when given) last. Return the failures, and whether the last run succeeded."""
    store, lab, progress = loop.store, loop.lab, loop.progress
    failures: list[str] = []
    last_ok = [False]
    numbers = [next(loop.counter) for _ in batch]
    titles = {run.run_id: _title(number, loop.planned, run) for number, run in zip(numbers, batch, strict=True)}
    which = f"run {numbers[0]}" if len(batch) == 1 else f"runs {numbers[0]}–{numbers[-1]}"
    title = f"{which}/{loop.planned} on {batch[0].backend.name}, one playbook"

    def ended(run: Run, result: runner.Result) -> None:
        run_failures, stored = record_run(store, run, result, hosts, complete=hosts == run.on(lab.hosts))
        failures.extend(run_failures)
        last_ok[0] = run is batch[-1] and not run_failures
        _lose_unreachable(lab, result, titles[run.run_id], loop.lost, mounted, teardown)
        progress.finish(titles[run.run_id], headline(stored, run_failures, run.on(lab.hosts)), run.run_id)

    runs = [(run, store.raw_dir(run.run_id), titles[run.run_id]) for run in batch]
    before = loop.take()
    after = [runner.Step(unmount, unmount_ended)] if unmount else []
    play_runs(lab, runs, title, hosts, lambda run: progress.start(_planned([run])[0]), ended, before, after)
    return failures, last_ok[0]


def _lose_unreachable(
    lab: Lab, result: runner.Result | None, title: str, lost: dict[str, str], mounted: list[str], teardown: list[str]
) -> None:
    """Leave the hosts the run found unreachable out of the rest of the campaign (a later call fills their gap)."""
    for outcome in result.failures() if result else []:
        if outcome.unreachable and outcome.host in mounted:
            lost[outcome.host] = f"unreachable since {title}: {outcome.message}"
            mounted.remove(outcome.host)
            teardown.remove(outcome.host)
            lab.console.print(
                f"[yellow]{outcome.host} is unreachable:[/] left out of the rest; "
                "run bench.all again later to fill its gap"
            )


def _needs_warming(run: Run) -> bool:
    return run.workload.warmup or run.cache_pass == "warm"


def _warm(
    lab: Lab,
    store: ResultStore,
    run: Run,
    hosts: list[str],
    warmed: set[tuple],
    previous: tuple[Run, list[str], bool] | None,
) -> str | None:
    """Warm-up before `run` as its workload asks; return how a warm run's cache was warmed (None: cold run).

    `warmup: true`: one unrecorded run of the point before its first measured one on this
    mount. The warm run of cache: warm follows its warm_command (run.yml runs it), or
    the cold run of the same repetition when that just ran on the same hosts, or else an
    unrecorded pass of the workload.
    """
    key = (run.point[:3], tuple(hosts))
    if run.workload.warmup and key not in warmed:
        _warm_up_pass(lab, store, run, hosts, "warm-up run (warmup: true)")
        warmed.add(key)
    if run.cache_pass != "warm":
        return None
    if run.workload.warm_command:
        return "after the warm_command " + " ".join(run.workload.warm_command)
    if (
        previous
        and previous[2]
        and previous[1] == hosts
        and previous[0].cache_pass == "cold"
        and previous[0].point[:3] == run.point[:3]
        and previous[0].repetition == run.repetition
    ):
        return "right after the cold run of the same repetition, caches not dropped"
    _warm_up_pass(lab, store, run, hosts, "warm-up pass (cache: warm)")
    return "after an unrecorded pass of the workload, caches not dropped"


def _warm_up_pass(lab: Lab, store: ResultStore, run: Run, hosts: list[str], what: str) -> None:
    """An unrecorded run of `run`'s workload (its files are fetched and discarded); a failure is a warning."""
    warm = run.model_copy(update={"run_id": f"{run.run_id}-warmup", "cache_pass": "warm"})
    scratch = store.raw_dir(warm.run_id)
    try:
        result = play_run(lab, [run_phase(warm)], warm, scratch, f"{what}: {run.label()}", hosts)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    errors = [o.describe() for o in result.failures()]
    if errors:
        lab.console.print(f"[yellow]{what} of {run.label()} failed[/] (the measured run follows): {errors[0]}")
    else:
        lab.console.print(f"{what} of {run.label()}: done, not recorded")


def _more_repetitions(campaign: Campaign, store: ResultStore, runs: list[Run], backend: str) -> list[Run]:
    """The next repetition of every point on `backend` whose stored repeats disagree, up to max_repetitions.

    A point's repeats are its runs in `runs` and the extra repetitions already stored
    (from this call or an earlier one). A point with a repetition not stored (failed,
    or left out) waits for the next call, which fills that gap first.
    """
    cap = campaign.max_repetitions or campaign.repetitions
    if cap <= campaign.repetitions:
        return []
    samples = store.samples()
    stored = {s.run_id for s in samples}
    chains: dict[tuple, list[Run]] = {}
    for run in runs:
        if run.backend.name == backend:
            chains.setdefault(run.point, []).append(run)
    nexts: dict[tuple, Run] = {}
    for point, chain in chains.items():
        while True:
            last = max(chain, key=lambda r: r.repetition)
            following = next(
                r
                for r in repetition(campaign, last.backend, last.workload, last.repetition + 1, last.hosts)
                if r.cache_pass == last.cache_pass
            )
            if following.run_id not in stored:
                break
            chain.append(following)
        if last.repetition < cap and all(r.run_id in stored for r in chain):
            nexts[point] = following
    ids = {r.run_id: point for point, chain in chains.items() for r in chain}
    disagreeing = {
        ids[run_id]
        for g in validity.groups([s for s in samples if s.run_id in ids])
        if g.metric in validity.MERIT_METRICS and len(g.values) > 1 and not g.agree
        for run_id in g.run_ids
    }
    return [run for point, run in nexts.items() if point in disagreeing]


def _provision(loop: _Loop) -> runner.Step:
    """Setting the hosts up, as a step of the campaign's first playbook: a host that fails is left out (skip),
    or stops the campaign (abort; or when every host failed)."""
    hosts, campaign = loop.lab.hosts, loop.campaign

    def ended(outcomes: dict[str, runner.HostOutcome]) -> dict[str, str]:
        if not outcomes:
            raise RunFailed("provisioning the hosts failed: the playbook stopped before it ended (see its output)")
        failed = [o for o in outcomes.values() if o.failed or o.unreachable]
        loop.unprovisioned.update(o.host for o in failed)  # nothing to tear down there, even if this stops all
        if failed and (campaign.on_host_failure == "abort" or len(failed) == len(hosts)):
            raise RunFailed(
                f"provisioning failed ({'on_host_failure: abort' if len(failed) < len(hosts) else 'on every host'}): "
                + "; ".join(o.describe() for o in failed)
            )
        for outcome in failed:
            loop.lost[outcome.host] = outcome.describe().split(": ", 1)[1]
            loop.lab.console.print(f"[yellow]{outcome.host} left out:[/] {loop.lost[outcome.host]}")
        return {o.host: f"provisioning failed: {loop.lost[o.host]}" for o in failed}

    return runner.Step(runner.Phase("setup.yml", campaign.setup_vars()), ended)


def _skipped(store: ResultStore, run: Run, hosts: list[str], lost: dict[str, str]) -> list[str]:
    """Record a run as failed on hosts left out of it, with the reason."""
    if not hosts:
        return []
    store.add_run_records([run_record(run, h, f"not run: {lost.get(h, 'host left out')}") for h in hosts])
    return [
        f"{run.workload.name} on {run.backend.name} (rep {run.repetition}) not run on {h}: "
        f"{lost.get(h, 'host left out')}"
        for h in hosts
    ]


# --- one-off fio runs and dry runs --------------------------------------------------------------


def single_fio(
    spec: Campaign, backend: str | None, profile: str, runtime: str, ramp: str, size: str | None
) -> Campaign:
    """A one-run campaign 'fio-<backend>' for `bench.fio`, validated like any campaign file."""
    from iolab.campaign import parse

    names = [b.name for b in spec.backends]
    chosen = backend or names[0]
    if chosen not in names:
        raise UserError(
            f"backend {chosen!r} is not in campaign {spec.name} (it has: {', '.join(names)}); pass --backend NAME"
        )
    workload: dict[str, Any] = {
        "name": Path(profile).stem if profile not in fio_options.PROFILES else profile,
        "type": "fio",
        "runtime": runtime,
        "ramp": ramp,
    }
    if profile in fio_options.PROFILES:
        workload["profile"] = profile
    elif Path(profile).exists():
        workload["jobfile"] = str(Path(profile).resolve())
    else:
        raise UserError(
            f"--profile {profile!r} is neither a fio profile ({', '.join(fio_options.PROFILES)}) "
            "nor an existing job file"
        )
    if size:
        workload["size"] = size
    backend_spec = next(b for b in spec.backends if b.name == chosen)
    raw = {"name": f"fio-{chosen}", "backends": [backend_spec.model_dump(exclude_none=True)], "workloads": [workload]}
    return parse(raw, "bench.fio flags", Path.cwd())


def next_repetition(spec: Campaign, store: ResultStore) -> Campaign:
    """The same one-run campaign with the first repetition not stored yet (earlier ones are kept)."""
    done = {run_id for run_id, _ in store.completed()}
    repetition = 1
    while expand(spec.model_copy(update={"repetitions": repetition}))[-1].run_id in done:
        repetition += 1
    return spec.model_copy(update={"repetitions": repetition})


ORCHESTRATION_S = 2.5  # per run, batched: prepare, drop caches, start together, collect (docs/PERFORMANCE.md)


def _estimate(runs: list[Run]) -> tuple[float, int]:
    """(seconds, runs not estimated): fio runs take runtime + ramp; loaders take as long as their data set."""
    warmed: set[tuple] = set()
    estimates = [_run_estimate(run, warmed) for run in runs]
    return sum(seconds for seconds, _ in estimates), sum(not known for _, known in estimates)


def _run_estimate(run: Run, warmed: set[tuple]) -> tuple[float, bool]:
    """(seconds, whether that is more than the orchestration) of one run; `warmed`: points warmed up already."""
    passes = 1
    if run.workload.warmup and run.point[:3] not in warmed:
        warmed.add(run.point[:3])
        passes += 1
    if isinstance(run.workload, FioWorkload):
        return passes * (run.workload.runtime + run.workload.ramp + ORCHESTRATION_S), True
    return passes * ORCHESTRATION_S, False


def _cache_line(run: Run) -> str:
    workload = run.workload
    line = {
        "drop": "caches dropped before each run (sync; echo 3 > /proc/sys/vm/drop_caches)",
        "keep": "caches kept as the previous run left them",
        "warm": "each repetition twice: cold (caches dropped), then warm (after "
        + (
            "the warm_command " + " ".join(workload.warm_command) + ", in " + run.backend.target
            if workload.warm_command
            else "the cold run, or an unrecorded pass of the workload"
        )
        + ")",
    }[workload.cache]
    if workload.warmup:
        line += "; one unrecorded warm-up run first"
    return line + f"; stopped after {workload.run_timeout(_default_timeout(run)):g} s"


def _default_timeout(run: Run) -> float:
    """The run's time limit as its bench role gets it."""
    return float(next(v for k, v in workload_vars(run).items() if k.endswith("_timeout")))


def _dataset_lines(spec: Campaign, files_at_run_time: bool) -> list[str]:
    """--dry-run's data set: what it is and where each backend's hosts get it."""
    if spec.dataset is None:
        return []
    packs = f", with packed copies ({', '.join(spec.dataset_formats)})" if spec.dataset_formats else ""
    lines = [
        f"  data set: {'at least ' if files_at_run_time else ''}{spec.dataset.files} {spec.dataset.kind} files "
        f"(seed {spec.dataset.seed}, {spec.dataset.classes} classes){packs}: on writable backends each host's own "
        f"copy, made after mounting at <target>/iolab-<host>/{DATASET_DIR} where not there already; "
        f"read-only backends hold one at <target>/{DATASET_DIR}"
    ]
    if files_at_run_time:
        lines.append(
            "    files: auto: the number is decided at run time from the hosts' RAM, which a dry run does not read; "
            f"the run ids below are for {spec.dataset.files} files"
        )
    for backend in spec.backends:
        if isinstance(backend, S3Backend):  # the one backend that stages the data set on the hosts' disks
            lines.append(
                f"    on {backend.name}: each host makes its copy in {datasets.host_root(backend.staging, '<host>')} "
                f"(refused first where that disk has no room for it), the first host uploads it to "
                f"{backend.target.rstrip('/')}/{DATASET_DIR}/"
            )
    return lines


def describe(spec: Campaign, lab: Lab, files_at_run_time: bool = False) -> str:
    """--dry-run: the runs, what each host would run and a time estimate, without touching a host.

    `files_at_run_time`: the data set is `files: auto`, sized here without the hosts' RAM."""
    from iolab.hosts import compress

    runs = expand(spec)
    seconds, unknown = _estimate(runs)
    estimate = f"about {seconds / 60:.0f} min" if seconds >= 60 else f"about {seconds:.0f} s"
    if unknown:
        estimate += f" plus the {unknown} data-loading run(s), as long as their data set takes to read"
    lines = [
        f"campaign {spec.name}: {len(runs)} runs on {compress(lab.hosts)}, "
        + (
            "in random order (order_seed " + str(spec.order_seed) + ")"
            if spec.order == "random"
            else "in the order written"
        )
        + f" ({estimate}; ≈{ORCHESTRATION_S:g} s of orchestration per run)"
    ]
    if spec.max_repetitions and spec.max_repetitions > spec.repetitions:
        lines.append(f"  repeats that disagree (more than 5% apart) get more repetitions, up to {spec.max_repetitions}")
    lines += _dataset_lines(spec, files_at_run_time)
    values: dict[tuple[str, str], set[str]] = {}
    for run in runs:
        for key, value in run.params.items():
            values.setdefault((run.workload.name, key), set()).add(json.dumps(value))
    shown: set[str] = set()
    for run in runs:
        point = " ".join(f"{k}={v}" for k, v in run.params.items() if len(values[(run.workload.name, k)]) > 1)
        lines.append(f"  {run.run_id}  {run.backend.name:<10} {run.workload.name:<14} rep {run.repetition}  {point}")
        if run.workload.name in shown:
            continue
        shown.add(run.workload.name)
        lines.append(f"      {_cache_line(run)}")
        variables = workload_vars(run)
        if run.workload.tool != "fio":
            lines.append(
                f"      on each host: {run.workload.describe()}; role {variables['run_role']} "
                f"builds the command (python -m iolab.host.loader.…, under iolab.host.hostrun) from:"
            )
            lines += [f"        {key}: {json.dumps(value)}" for key, value in variables.items() if key != "run_role"]
            continue
        if variables.get("bench_fio_jobtext"):  # the user's job file as checked, includes inlined
            jobfile = getattr(run.workload, "jobfile", "")
            job = f"; {jobfile}, run in <target>/iolab-<host>\n" + variables["bench_fio_jobtext"]
        else:
            bssplit = (
                {"bssplit": "<from the data set's size histogram>"} if variables.get("bench_fio_bssplit_from") else {}
            )
            job = fio_options.render(
                {
                    **variables["bench_fio_options"],
                    **bssplit,
                    "filename": "<target>/iolab-<host>/" + fio_options.DATA_FILE,
                    "size": str(variables["bench_fio_size"] or "<fits>"),
                },
                "iolab",
            )
        lines.append(
            "      on each host: fio --output=fio.json --output-format=json+ --eta=always job.fio, where job.fio is:"
        )
        lines += ["        " + line for line in job.splitlines() if line]
    return "\n".join(lines)
