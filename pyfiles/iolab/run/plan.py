"""What one call of a campaign runs, and in what order: planned once, before anything runs.

    make(campaign, hosts, store)        the runs, those not stored yet and each backend's queue; a run its hosts
                                        could not measure is refused here (Workload.admissible)
    more_repetitions(...)               the next repetition of each point whose stored repeats disagree
    parts(queue)                        a queue cut at its searches: each search plays alone
    planned(runs), estimate(runs)       the runs' expected times (Progress's plan, --dry-run's total)

iolab.run.bench runs the plan: a backend session per queue (iolab.run.session).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from iolab.campaign.model import Campaign, Run, expand, repetition
from iolab.measures import validity
from iolab.measures.samples import ResultStore, Sample
from iolab.progress import Planned

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


def make(campaign: Campaign, hosts: list[str], store: ResultStore, only_repetition: int | None = None) -> Plan:
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
    return Plan(runs, todo, {backend: queue for backend, queue in queues.items() if queue}, extra)


def more_repetitions(campaign: Campaign, samples: list[Sample], runs: list[Run], backend: str) -> list[Run]:
    """The next repetition of every point on `backend` whose stored repeats (`samples`: the store's) disagree,
    up to max_repetitions.

    A point's repeats are its runs in `runs` and the extra repetitions already stored
    (from this call or an earlier one). A point with a repetition not stored (failed,
    or left out) waits for the next call, which fills that gap first.
    """
    cap = campaign.max_repetitions or campaign.repetitions
    if cap <= campaign.repetitions:
        return []
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
