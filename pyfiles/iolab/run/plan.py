"""What one call of a campaign runs, and in what order: planned once, before anything runs.

    make(campaign, lab, store)          the whole prelude of a call, before anything runs: the store checked, the
                                        queues, the live metrics' destination, the ledger checked and begun, each
                                        fault's preflight, the progress; each refusal one line
    queued(campaign, hosts, store)      the runs, those not stored yet and each backend's queue; a run its hosts
                                        could not measure is refused here (Workload.admissible)
    parts(queue)                        a queue cut at its searches: each search plays alone
    planned(runs), estimate(runs)       the runs' expected times (Progress's plan, --dry-run's total)

iolab.run.bench runs the plan: a backend session per queue (iolab.run.session).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
from pathlib import Path
from typing import NamedTuple

from iolab.campaign.model import Campaign, Run, expand
from iolab.campaign.repeats import more_repetitions
from iolab.drive import injector, lease, live_metrics
from iolab.drive.execute import Lab
from iolab.measures.samples import ResultStore
from iolab.progress import Planned, Progress
from iolab.store import ledger

ORCHESTRATION_S = 2.5  # per run, batched: prepare, drop caches, start together, collect (docs/PERFORMANCE.md)


class Entry(NamedTuple):
    """A run of a backend's queue and the hosts it is to run on."""

    run: Run
    hosts: list[str]


@dataclasses.dataclass
class Plan:
    runs: list[Run]  # the campaign's runs (bench.fio: this call's repetition only)
    todo: list[Entry]  # the runs not stored yet on every host, each with the hosts that lack it
    queues: dict[str, list[Entry]]  # per backend with something to run: its todo, then more repetitions
    extra: bool  # repeats that disagree may earn more repetitions (max_repetitions above repetitions)
    done: set[tuple[str, str]]  # (run id, host) of every run the store holds done, as the call began


def make(
    campaign: Campaign, lab: Lab, store: ResultStore, resume: bool = True, only_repetition: int | None = None
) -> tuple[Plan, Progress]:
    """Everything before the first run of a call, in the order a refusal costs least: `resume` false moves the
    earlier results aside; the store must be writable (its notes said); the queues (`queued`); the live metrics'
    destination; a campaign file edited since the store's last call refused or said (not for bench.fio's store,
    which gathers one-off runs of any flags); every fault checked on this controller; the ledger begun, with who
    holds the hosts; then the plan, and the call's progress planned from its queues."""
    console = lab.console
    if not resume and (moved := start_over(store)):
        console.print(f"--no-resume: earlier results kept in {moved}")
    for note in store.preflight():  # writable, with room, no torn line: before anything runs
        console.print(f"[yellow]{note}[/]")
    plan = queued(campaign, lab.hosts, store, only_repetition)  # refuses what could not be measured
    live_metrics.destination()  # a $IOLAB_LIVE_METRICS that names no destination is refused before any run
    if only_repetition is None and (edited := ledger.check(store, campaign, plan.runs, plan.done)):
        console.print(f"[yellow]{edited}[/]")
    injector.preflight([e.run for e in plan.todo if e.run.workload.faults], lab)  # each fault can be applied here
    ledger.begin(store, campaign, plan.runs, lab.hosts, lease.record(f"campaign {campaign.name}"))
    return plan, Progress(planned([entry.run for queue in plan.queues.values() for entry in queue]), console)


def start_over(store: ResultStore) -> Path | None:
    """--no-resume: keep the old results, moved aside, and start with an empty store."""
    if not store.dir.exists():
        return None
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    moved = store.dir.with_name(f"{store.dir.name}.{stamp}")
    shutil.move(store.dir, moved)
    return moved


def queued(campaign: Campaign, hosts: list[str], store: ResultStore, only_repetition: int | None = None) -> Plan:
    """The call's plan: its runs, what the store lacks of them, and each backend's queue. `only_repetition`: that
    repetition and no other (bench.fio: each call is one new repetition on the hosts it selects)."""
    runs = [r for r in expand(campaign, len(hosts)) if only_repetition in (None, r.repetition)]
    files = campaign.dataset.files if campaign.dataset else None
    for run in runs:  # e.g. a search whose ranks get under two batches: refused before anything runs
        run.workload.admissible(files, len(hosts))
    done = store.completed()
    todo = [Entry(r, [h for h in r.on(hosts) if (r.run_id, h) not in done]) for r in runs]
    todo = [entry for entry in todo if entry.hosts]
    extra = campaign.max_repetitions is not None and campaign.max_repetitions > campaign.repetitions
    stored = store.samples() if extra else []
    queues = {
        backend: [entry for entry in todo if entry.run.backend.name == backend]
        + [Entry(r, r.on(hosts)) for r in more_repetitions(campaign, stored, runs, backend)]
        for backend in dict.fromkeys(r.backend.name for r in runs)
    }
    return Plan(runs, todo, {backend: queue for backend, queue in queues.items() if queue}, extra, done)


def parts(queue: list[Entry]) -> list[list[Entry]]:
    """The queue cut at its searches: each search alone, the runs between them together."""
    out: list[list[Entry]] = []
    for entry in queue:
        if out and not searches(entry.run) and not searches(out[-1][0].run):
            out[-1].append(entry)
        else:
            out.append([entry])
    return out


def search_of(run: Run) -> str | None:
    """What the run searches for (its workload's `search:`: iolab.run.bench.SEARCHES answers it), None for a run
    that is one measurement."""
    return getattr(run.workload, "search", None)


def searches(run: Run) -> bool:
    """A run that is a search (iolab.run.accelerators, iolab.run.kvcache_search), not one measurement."""
    return search_of(run) is not None


def planned(runs: list[Run]) -> list[Planned]:
    """The runs as Progress plans them: runs of one workload take alike times; estimates as --dry-run's."""
    warmed: set[tuple] = set()
    return [Planned(run.run_id, run.workload.name, run_estimate(run, warmed)[0]) for run in runs]


def estimate(runs: list[Run]) -> tuple[float, int]:
    """(seconds, runs not estimated): fio runs take runtime + ramp; loaders take as long as their data set."""
    warmed: set[tuple] = set()
    estimates = [run_estimate(run, warmed) for run in runs]
    return sum(seconds for seconds, _ in estimates), sum(not known for _, known in estimates)


def run_estimate(run: Run, warmed: set[tuple]) -> tuple[float, bool]:
    """(seconds, whether that is more than the orchestration) of one run; `warmed`: points warmed up already."""
    passes = 1
    if run.workload.warmup and run.point[:3] not in warmed:
        warmed.add(run.point[:3])
        passes += 1
    tool = run.workload.estimate()
    return passes * ((tool or 0.0) + ORCHESTRATION_S), tool is not None
