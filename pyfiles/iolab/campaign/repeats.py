"""More repetitions where a campaign's repeats disagree: its `max_repetitions` rule, read against the store.

    more_repetitions(campaign, samples, runs, backend)   the next repetition of each point whose stored repeats
                                                          disagree (measures.validity's 5 % rule), up to the cap

iolab.run.plan asks it as it plans a call, iolab.run.bench after each pass over a backend's queue.
"""

from __future__ import annotations

from iolab.campaign.model import Campaign, Run, repetition
from iolab.measures import validity
from iolab.measures.samples import Sample


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
