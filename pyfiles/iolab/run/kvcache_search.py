"""The KV-cache answer: the most users per client (or clients per host) a backend serves under a latency bound.

MLPerf Storage scores the KV-cache workload on read bandwidth and on its latency figure, the most of
the clients' device read P95s (rule 6.3.4.3): a storage system scales by holding that figure as clients
are added. A kvcache workload with `search: users` (or `clients`) asks iolab's question of it: how far
can the load grow while the max-of-P95 read latency stays at or under `latency_bound` (200 ms by
default: kv-cache.py's own pass mark; docs/REFERENCE_FIGURES.md) in every probe. The search is the
accelerator search's (iolab.run.accelerators: doubling, bisection, the two points next to the boundary
probed three times each, a point holds only when every probe held, disturbed probes run again,
what limited the boundary from iolab.measures.limits); only what a probe measures differs. Each probe is a
run of the campaign: the workload at N users per client (or N clients per host) for its duration,
caches dropped before it, stored, so that a search run again reuses it.

The answer is the sample `kv_served` (unit count: the most that held), on each host and for all of
them (host "*"), with its interval, what limited it, every point's probes and their P95s, and the
read bandwidth and tokens/s at that point (`summary`); the report leads with it (iolab.report.kvcache).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from iolab.campaign.model import Run, repetition
from iolab.kinds.kvcache.workload import KvcacheWorkload
from iolab.measures import limits
from iolab.measures.samples import AGGREGATE_HOST, Sample
from iolab.parsers import Measurement
from iolab.report.tables import fed_label
from iolab.run.accelerators import Outcome, judged, measure, points_of, probing
from iolab.run.session import BackendSession
from iolab.store import record

METRIC = "kv_served"
PER = {"users": "user(s) per client", "clients": "client(s) per host"}


@dataclasses.dataclass(frozen=True)
class Probe:
    count: int  # users per client, or clients per host
    p95: float  # s: the most of every rank's device read P95, over all hosts (the rules' figure)
    read_bw: float  # B/s, all hosts
    tokens_per_s: float  # all hosts
    run_id: str = ""
    repeat: int = 1  # the how-manieth run of this point (its repetition in the store)
    counted: bool = True  # False: disturbed by foreign CPU and run again
    disturbed: str | None = None
    limited_by: dict[str, str] | None = None
    capacity: int | None = None  # the most of `count` this host can run, from this probe


def probed(workload: KvcacheWorkload, count: int) -> KvcacheWorkload:
    """A search's workload as one probe runs it: `count` users per client (or clients per host), a measurement."""
    assert workload.search  # a search's
    return workload.model_copy(update={workload.search: count, "search": None, "latency_bound": None})


def _probe(n: int, repeat: int, run_id: str, samples: list[Sample], hosts: list[str]) -> Probe:
    mine = [s for s in samples if s.host in hosts]

    def total(metric: str) -> float:
        return sum(s.value for s in mine if s.metric == metric)

    worst = [s.value for s in mine if s.metric == "kv_read_p95_max"]
    return Probe(n, max(worst), total("read_bw"), total("tokens_per_s"), run_id, repeat)


def _line(p: Probe, bound: float, per: str, hosts: int) -> str:
    verdict = "ok" if p.p95 <= bound else f"over {bound * 1000:g} ms"
    if not p.counted:
        verdict = f"disturbed ({p.disturbed}), run again"
    return (
        f"  {p.count:>4} {per}, probe {p.repeat}: max-of-P95 read {p.p95 * 1000:6.1f} ms  {verdict}  "
        f"({p.read_bw / 2**30:.2f} GiB/s read, {p.tokens_per_s:.0f} tokens/s over {hosts} host(s))"
    )


def searched(session: BackendSession, run: Run, active: list[str], title: str) -> list[Sample]:
    """A campaign's kvcache search on the session's mounted backend: probe, then store `kv_served` (on each host
    and for all of them); the answer's line with its interval and limit; a failure is the session's.

    `bench` hands it to the backend session (`BackendSession.search`), which stores the samples it returns
    as the search's run; a RunFailed (a probe failed) is the run's failure."""
    workload = run.workload
    assert isinstance(workload, KvcacheWorkload) and workload.search  # bench sends searches only
    console, store = session.state.lab.console, session.state.store
    per, bound = PER[workload.search], workload.bound
    ceiling = workload.ceiling()
    console.print(
        f"{title}: searching the most {per} whose max-of-P95 read latency holds ≤ {bound * 1000:g} ms "
        f"(ceiling {ceiling}; {workload.settled('duration'):g} s per probe)",
        soft_wrap=True,
    )

    def measured(n: int, repeat: int) -> Probe:
        point = repetition(session.state.campaign, run.backend, probed(workload, n), repeat, run.hosts)[0]
        samples, stored = measure(session, point, active, f"{n} {per}", repeat, "kv_read_p95_max")
        return judged(_probe(n, repeat, point.run_id, samples, active), samples, active, stored, n)

    def show(p: Probe) -> None:
        console.print(_line(p, bound, per, len(active)), soft_wrap=True)

    started = time.time()
    outcome, probes = probing(measured, lambda p: p.count, lambda p: p.p95, show, ceiling, lambda v: v <= bound)
    common = summary(outcome, probes, bound, ceiling, per)
    console.print(answer(common, run.backend.name, len(active)), soft_wrap=True)
    return served_samples(run, common, active, store.samples(), started, time.time())


def summary(outcome: Outcome, probes: list[Probe], bound: float, ceiling: int, per: str) -> dict[str, Any]:
    """The answer's metadata: its interval, each point's probes and P95s, what limited it, its flags."""
    counted = [p for p in probes if p.counted]
    points = points_of(probes, lambda p: p.count, lambda p: p.p95, lambda p95: p95 <= bound, ("count", "p95"))
    at = max((p for p in counted if p.count == max(outcome.held, 1)), key=lambda p: p.p95)
    limit = _limit(outcome, counted, bound, ceiling, per)
    disturbed = next((p.disturbed for p in counted if p.disturbed), None)
    flags = [f"disturbed: {disturbed}"] if disturbed else []
    if limit["side"] == "client":
        flags.append("measures this host, not the storage")
    return {
        "at": dataclasses.asdict(at),
        "held": outcome.held,
        "failed": outcome.failed,
        "bound": outcome.bound,
        "latency_bound": bound,
        "ceiling": ceiling,
        "per": per,
        "limited_by": limit,
        "disturbed": disturbed,
        "points": points,
        "probes": [dataclasses.asdict(p) for p in probes],
        "flags": flags,
    }


def _limit(outcome: Outcome, counted: list[Probe], bound: float, ceiling: int, per: str) -> dict[str, str]:
    """What stopped the search: the failing boundary probe's limit, what this host can run, or the ceiling."""
    if outcome.bound == "ceiling":
        return {"side": "undetermined", "reason": f"the workload's ceiling of {ceiling} {per}, which held"}
    if outcome.bound == "host":
        return {"side": "client", "reason": f"this host's capacity: it runs at most {outcome.held} {per}"}
    over = [p for p in counted if p.count == outcome.failed and p.p95 > bound]
    return over[0].limited_by or {"side": "undetermined", "reason": "an unknown: the probes recorded no evidence"}


def answer(meta: dict[str, Any], backend: str, hosts: int) -> str:
    """The search's line: the answer with its interval, the figures at it, what limited it, its flags."""
    at, limit, bound = meta["at"], meta["limited_by"], meta["latency_bound"] * 1000
    flags = "".join(f"; ⚑ {flag}" for flag in meta["flags"])
    probes = next((len(p["p95"]) for p in meta["points"] if p["count"] == at["count"]), 1)
    worst = f", the worst of its {probes} probes," if probes > 1 else ""
    if meta["held"] == 0:
        return (
            f"answer: none — even 1 {meta['per']} takes the max-of-P95 read latency over {bound:g} ms on {backend} "
            f"({at['p95'] * 1000:.1f} ms); {limits.said(limit)}{flags}"
        )
    return (
        f"answer: {fed_label(meta['held'], {**meta, 'flags': []}, meta['per'])} on {backend} (max-of-P95 read "
        f"{at['p95'] * 1000:.1f} ms{worst} ≤ {bound:g} ms, {at['read_bw'] / 2**30:.2f} GiB/s read, "
        f"{at['tokens_per_s']:.0f} tokens/s over {hosts} host(s)); {limits.said(limit)}{flags}"
    )


def served_samples(
    run: Run, common: dict[str, Any], hosts: list[str], stored: list[Sample], started: float, ended: float
) -> list[Sample]:
    """kv_served of a search, on each host and for all of them (host "*"): the most that held, the summary in its
    metadata, and each host's own figures at that point."""
    workload = run.workload
    assert isinstance(workload, KvcacheWorkload) and workload.search
    point = [s for s in stored if s.run_id == common["at"]["run_id"]]
    params = {k: v for k, v in run.params.items() if k != workload.search}
    params |= {"workload": workload.name, "per": common["per"], "latency_bound": common["latency_bound"]}

    def sample(host: str, metadata: dict[str, Any]) -> Sample:
        value = Measurement(METRIC, float(common["held"]), "count")
        return record.run_sample(run, host, value, (started, ended), params, {**common, **metadata})

    per_host = []
    for host in hosts:
        mine = [s for s in point if s.host == host and not s.params]
        figures = {s.metric: s.value for s in mine if s.metric in ("read_bw", "tokens_per_s", "kv_read_p95_max")}
        validity: dict[str, Any] = next((s.metadata.get("validity", {}) for s in mine), {})
        per_host.append(sample(host, {"host_at": figures, "validity": validity}))
    return per_host + [sample(AGGREGATE_HOST, {"hosts": hosts})]
