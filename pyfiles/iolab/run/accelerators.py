"""bench.accelerators: the most emulated accelerators per host that a backend keeps at MLPerf's AU threshold.

MLPerf Storage's figure of merit: how many accelerators a storage system feeds while
each stays busy at least its model's AU threshold of the time (90 % for unet3d and
resnet50, 85 % for retinanet, 70 % for cosmoflow: docs/REFERENCE_FIGURES.md). The search doubles
N (1, 2, 4, …; after the first probe straight to where the backend's fio read baseline puts the boundary, where
the campaign measured one, then N+1, N+3, …) until a probe falls below the threshold, or N reaches what this host
can emulate (iolab.measures.limits.capacity) or the workload's ceiling, then bisects between the most
that held and the fewest that failed, and probes those two points again until each has
three probes: a point holds only when every probe of it held (`search`; the rule and why:
docs/DESIGN.md, "How the accelerator search decides"). Each probe is one run of the
PyTorch loader with N emulated accelerators on every selected host (one rank process
each, as DLIO runs one MPI rank per accelerator), over as many epochs as give every rank
500 measured steps; its AU is the lowest of the hosts' (a host's AU is the mean of its
ranks'), and iolab.measures.limits says from its telemetry what limited it and whether foreign
CPU disturbed it (then it is run again). The backend is mounted and the data set made
once for the whole search. Probes are stored as runs of the campaign
`accelerators-<backend>-<type>` (a repeat is the run's repetition), so a search that is
run again reuses them.

In a campaign, a pytorch workload with `search: accelerators` is the same search on
each backend, with its `accelerators` per host as the ceiling (`fed`): the probes are runs
of that campaign, and the answer is the sample `accelerators_fed` (unit count: the most
that held) with its interval, what limited it, its flags, and the AU and throughput at
that point (`summary`). The command's own parts (its probes' campaign, the backend session, the last line) are
iolab.run.accelerators_task's.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from iolab.campaign import profiles
from iolab.campaign.model import Run, repetition
from iolab.errors import RunFailed, UserError
from iolab.kinds.pytorch.workload import STEP_FLOOR, PytorchWorkload, probe_epochs, step_floor
from iolab.measures import limits
from iolab.measures.samples import AGGREGATE_HOST, Sample
from iolab.parsers import Measurement
from iolab.progress import REPEATS
from iolab.run.session import BackendSession
from iolab.store import record
from iolab.workloads.mlperf import AU_THRESHOLD, PRESETS

DISTURBED_RETRIES = 2  # a probe disturbed by foreign CPU is run again up to this many times
# Test-only: fewer runs again (0: none), where foreign CPU is there by design: the test suite's other pytest-xdist
# worker on the same two cores disturbed nearly every probe, so each search ran its probes three times over. A
# disturbed probe that counts is flagged all the same.
RETRIES_ENV = "IOLAB_DISTURBED_RETRIES"


def disturbed_retries() -> int:
    """How many times a disturbed probe is run again: DISTURBED_RETRIES, or a test's fewer (RETRIES_ENV)."""
    raw = os.environ.get(RETRIES_ENV, "")
    if not raw:
        return DISTURBED_RETRIES
    if not raw.isdigit() or int(raw) > DISTURBED_RETRIES:
        raise UserError(f"{RETRIES_ENV}={raw!r}: a test's runs again of a disturbed probe are 0 to {DISTURBED_RETRIES}")
    return int(raw)


def threshold_of(workload: PytorchWorkload) -> float:
    """The AU a probe must hold: MLPerf's threshold for the accelerator's model (retinanet 85 %), else AU_THRESHOLD."""
    preset = PRESETS.get(workload.accelerator.model) if workload.accelerator else None
    return preset.au_threshold if preset else AU_THRESHOLD


def probed(workload: PytorchWorkload, accelerators: int, epochs: int) -> PytorchWorkload:
    """A search's workload as one probe runs it: N accelerators per host over `epochs`, a measurement, not a search
    (so that no probe shares the search's run id)."""
    return workload.model_copy(update={"accelerators": accelerators, "epochs": epochs, "search": None})


@dataclasses.dataclass(frozen=True)
class Probe:
    accelerators: int
    au: float  # the lowest host AU, %
    samples_per_s: float  # all hosts together
    read_bw: float  # all hosts together, B/s
    run_id: str = ""
    repeat: int = 1  # the how-manieth run of this point (its repetition in the store)
    steps_per_rank: int | None = None  # measured steps of the slowest rank (the au samples' metadata)
    counted: bool = True  # False: disturbed by foreign CPU and run again
    disturbed: str | None = None  # why foreign CPU disturbed it (iolab.measures.limits)
    limited_by: dict[str, str] | None = None  # {"side": storage | client | undetermined, "reason": ...}
    capacity: int | None = None  # the most ranks per host this host can emulate, from this probe


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a search found: the interval (held, failed) and why it stopped without a failure (bound)."""

    held: int  # the most accelerators per host that held every probe (0: even 1 failed)
    failed: int | None  # the fewest that failed a probe; None: the search stopped without a failure
    bound: str | None  # "host" (what this host can emulate) or "ceiling" (the workload's): where it stopped
    history: tuple[tuple[int, float], ...]  # every (N, AU) counted, in order


def search(
    probe: Callable[[int], float],
    threshold: float = AU_THRESHOLD,
    ceiling: int = 64,
    capacity: Callable[[], int] | None = None,
    repeats: int = REPEATS,
    passes: Callable[[float], bool] | None = None,
    aim: Callable[[], int | None] | None = None,
) -> Outcome:
    """The most N ≤ min(ceiling, capacity()) whose every probe(N) is ≥ threshold, with its interval.

    `passes` says when a probe's figure holds, where that is not "at least the threshold" (the KV-cache
    search's max-of-P95 latency holds at most its bound: iolab.run.kvcache_search).

    Steps N up from 1 by a step that doubles (1, 2, 4, 8, …) until a probe fails or N reaches the ceiling
    or what this host can emulate (`capacity()`, read after each probe). Where `aim()`, asked once after
    the first probe held, names an N above it (where the storage's own baseline puts the boundary), the
    next probe is there and the step starts again at 1 (aim 7: 1, 7, 8, 10, …). Then it bisects between
    the most that held and the fewest that failed. Those two points are probed again, interleaved, until
    each has `repeats` probes; a point holds only when every probe of it held. A repeat that fails the
    point that held moves the boundary down, and the search bisects and repeats again: a point is probed
    only between the most that held and the fewest that failed, so no N+1 is taken above an N that failed.

    >>> search(lambda n: 100 if n <= 5 else 50, ceiling=8).history
    ((1, 100), (2, 100), (4, 100), (8, 50), (6, 50), (5, 100), (6, 50), (5, 100), (6, 50), (5, 100))
    >>> search(lambda n: 100 if n <= 5 else 50, ceiling=8, aim=lambda: 5).history
    ((1, 100), (5, 100), (6, 50), (5, 100), (6, 50), (5, 100), (6, 50))
    """
    held_by = passes or (lambda value: value >= threshold)
    figures: dict[int, list[float]] = {}
    history: list[tuple[int, float]] = []

    def run(n: int) -> None:
        value = probe(n)
        figures.setdefault(n, []).append(value)
        history.append((n, value))

    def holds(n: int) -> bool:
        return all(held_by(value) for value in figures[n])

    n, step = 1, 1
    while True:
        run(n)
        top = min(ceiling, capacity() if capacity else ceiling)
        if not holds(n) or n >= top:
            break
        aimed = aim() if aim and len(history) == 1 else None
        n, step = (min(aimed, top), 1) if aimed and aimed > n + step else (min(n + step, top), step * 2)
    while True:
        failed = min((m for m in figures if not holds(m)), default=None)
        held = max((m for m in figures if holds(m) and (failed is None or m < failed)), default=0)
        if failed is not None and failed - held > 1:
            run((held + failed) // 2)
            continue
        pending = [m for m in (held, failed) if m and len(figures[m]) < repeats]
        if not pending:
            break
        run(min(pending, key=lambda m: (len(figures[m]), m == history[-1][0])))  # the fewer probes, else the other
    bound = None if failed is not None else "ceiling" if held >= ceiling else "host"
    return Outcome(held, failed, bound, tuple(history))


def probe_until(
    session: BackendSession,
    run_of: Callable[[int, int], Run],
    hosts: list[str],
    ceiling: int,
    threshold: float = AU_THRESHOLD,
    show: Callable[[str], None] = print,
    floor: int = STEP_FLOOR,
) -> tuple[Outcome, list[Probe]]:
    """Probe N accelerators per host (the run `run_of(N, repeat)`, stored or run now) as `search` asks.

    The session's backend is mounted and the data set made. Each probe of a point is its own run (its
    repeat is the run's repetition), so a search run again reuses what it stored. A probe measuring
    fewer than `floor` steps per rank, or a failed one, stops the search (RunFailed). After the first
    probe the search aims where the backend's fio read baseline in the store puts the boundary (`aimed`).
    """

    def measured(n: int, repeat: int) -> Probe:
        run = run_of(n, repeat)
        samples, stored = measure(session, run, hosts, f"{n} accelerator(s) per host", repeat, "au")
        found = judged(_probe(n, repeat, run.run_id, samples, hosts), samples, hosts, stored, n)
        if found.steps_per_rank is None or found.steps_per_rank < floor:
            raise RunFailed(
                f"the probe with {n} accelerator(s) per host measured "
                f"{found.steps_per_rank if found.steps_per_rank is not None else 'no'} steps per rank "
                f"(metadata.steps_per_rank), under the floor of {floor}: its AU is no answer; run {run.run_id}"
            )
        return found

    def line(p: Probe) -> None:
        show(_line(p, threshold, len(hosts)))

    def aim(p: Probe) -> int | None:  # asked once, after the first probe held: the store read then, not per probe
        stored = session.state.store.samples()
        backend = next(s.backend for s in stored if s.run_id == p.run_id)
        return aimed(p, limits.fio_baseline(stored, backend))

    return probing(
        measured,
        lambda p: p.accelerators,
        lambda p: p.au,
        line,
        ceiling,
        lambda au: au >= threshold,
        aim,
    )


def aimed(p: Probe, baseline: tuple[float, str] | None) -> int | None:
    """Where the backend's fio read baseline (B/s, its workload) puts the boundary, from a probe that held: as
    many accelerators per host as that rate feeds at this probe's read rate per accelerator. None without a
    baseline or a read rate. A guess that only saves probes: the search probes its neighbours and repeats the
    boundary as from any point, so the answer is the same wherever it aims."""
    if baseline is None or p.read_bw <= 0:
        return None
    return int(p.accelerators * baseline[0] / p.read_bw)


P = TypeVar("P", bound="Probed")


class Probed(Protocol):
    """What the search's loop reads of a probe, whatever it measured."""

    @property
    def disturbed(self) -> str | None: ...

    @property
    def capacity(self) -> int | None: ...

    @property
    def counted(self) -> bool: ...


def probing(
    measured: Callable[[int, int], P],
    point: Callable[[P], int],
    figure: Callable[[P], float],
    show: Callable[[P], None],
    ceiling: int,
    passes: Callable[[float], bool],
    aim: Callable[[P], int | None] | None = None,
) -> tuple[Outcome, list[P]]:
    """`search` over probes (`measured(N, repeat)`: a run stored or run now, judged): one that foreign CPU
    disturbed (limits.disturbed) is run again, up to disturbed_retries() times, the last counting all the same;
    what this host can emulate is the last probe's capacity, where to aim the last probe's `aim`. Returns the
    outcome and every probe, in order."""
    probes: list[P] = []
    retries = disturbed_retries()

    def probe(n: int) -> float:
        for attempt in range(1 + retries):
            found = measured(n, 1 + sum(1 for p in probes if point(p) == n))
            found = dataclasses.replace(found, counted=not found.disturbed or attempt == retries)  # type: ignore[type-var]
            probes.append(found)
            show(found)
            if found.counted:
                break
        return figure(found)

    def capacity() -> int:
        known = probes[-1].capacity
        return ceiling if known is None else known

    return search(
        probe, ceiling=ceiling, capacity=capacity, passes=passes, aim=(lambda: aim(probes[-1])) if aim else None
    ), probes


def measure(
    session: BackendSession, run: Run, hosts: list[str], what: str, repeat: int, metric: str
) -> tuple[list[Sample], list[Sample]]:
    """A probe's samples, stored already (with `metric` on every host) or run now, and the store's samples then
    (its own and the backend's fio baseline); RunFailed when the run fails. `what`: the point, as said."""
    store = session.state.store
    stored = store.samples()  # read once per probe
    samples = stored_of(stored, run, hosts, metric)
    if samples is None:
        failures, _, _ = session.measure(run, f"probe: {what}" + (f", repeat {repeat}" if repeat > 1 else ""), hosts)
        if failures:
            raise RunFailed(f"the probe with {what} failed: {failures[0]}")
        stored = store.samples()
        samples = stored_of(stored, run, hosts, metric)
        assert samples is not None
    return samples, stored


def _line(p: Probe, threshold: float, hosts: int) -> str:
    """One probe as the search shows it."""
    verdict = "ok" if p.au >= threshold else f"below {threshold:g} %"
    if not p.counted:
        verdict = f"disturbed ({p.disturbed}), run again"
    return (
        f"  {p.accelerators:>4} accelerator(s) per host, probe {p.repeat}: AU {p.au:5.1f} %  {verdict}  "
        f"({p.samples_per_s:.0f} samples/s, {p.read_bw / 2**20:.0f} MiB/s over {hosts} host(s), "
        f"{p.steps_per_rank} steps per rank)"
    )


def searched(session: BackendSession, run: Run, active: list[str], title: str) -> list[Sample]:
    """A campaign's `search: accelerators` run on the session's mounted backend: probe, then store
    `accelerators_fed` (on each host and for all of them, host "*"); a failure is the session's.

    Each probe is a run of the campaign: the run's workload at N accelerators per host, over as
    many epochs as give each rank the step floor (a probe stored by an earlier call is reused).
    The workload's `accelerators` is the ceiling the search may reach, not a cap it hides.

    `bench` hands it to the backend session (`BackendSession.search`), which stores the samples it returns
    as the search's run; a RunFailed (a probe failed) is the run's failure."""
    workload = run.workload
    assert isinstance(workload, PytorchWorkload) and workload.accelerator  # a search's schema asks for both
    campaign = session.state.campaign
    assert campaign.dataset  # a pytorch workload's campaign has one (bench.run_campaign checked it: admissible)
    files, floor = campaign.dataset.files, step_floor()
    console, store = session.state.lab.console, session.state.store
    threshold = threshold_of(workload)
    console.print(
        f"{title}: searching the most {workload.accelerator.type} accelerators per host at "
        f"AU ≥ {threshold:g} % (ceiling {workload.accelerators}; {floor} steps per rank per probe)",
        soft_wrap=True,
    )

    def run_of(n: int, repeat: int) -> Run:
        point = probed(workload, n, probe_epochs(workload, files, n, len(active), floor))
        return repetition(campaign, run.backend, point, repeat, run.hosts)[0]

    started = time.time()
    outcome, probes = probe_until(
        session,
        run_of,
        active,
        workload.accelerators,
        threshold,
        lambda line: console.print(line, soft_wrap=True),
        floor,
    )
    return fed_samples(run, outcome, probes, active, store.samples(), started, time.time(), floor)


def summary(outcome: Outcome, probes: list[Probe], threshold: float, ceiling: int, floor: int) -> dict[str, Any]:
    """The metadata of an answer: its interval, each point's probes and AU spread, what limited it, its flags."""
    counted = [p for p in probes if p.counted]
    points = points_of(
        probes, lambda p: p.accelerators, lambda p: p.au, lambda au: au >= threshold, ("accelerators", "au")
    )
    at = min((p for p in counted if p.accelerators == max(outcome.held, 1)), key=lambda p: p.au)
    limit = _limit(outcome, counted, threshold, ceiling)
    disturbed = next((p.disturbed for p in counted if p.disturbed), None)
    flags = [f"disturbed: {disturbed}"] if disturbed else []
    if limit["side"] == "client":
        flags.append("measures this host, not the storage")
    if floor < STEP_FLOOR:
        flags.append(f"probes of {floor} steps per rank, under MLPerf's {STEP_FLOOR}")
    return {
        "at": dataclasses.asdict(at),
        "held": outcome.held,
        "failed": outcome.failed,
        "threshold": threshold,
        "bound": outcome.bound,
        "ceiling": ceiling,
        "limited_by": limit,
        "disturbed": disturbed,
        "step_floor": floor,
        "steps_per_rank": min((p.steps_per_rank or 0 for p in counted), default=0),
        "points": points,
        "probes": [dataclasses.asdict(p) for p in probes],
        "flags": flags,
    }


def points_of(
    probes: list[P], point: Callable[[P], int], figure: Callable[[P], float], passes: Callable[[float], bool], keys
) -> list[dict[str, Any]]:
    """Each point a search probed, in order: its counted probes' figures and their spread, whether every one held,
    how many were disturbed and run again; `keys` names the point and its figure (accelerators, au)."""
    out = []
    for n in sorted({point(p) for p in probes if p.counted}):
        values = [figure(p) for p in probes if p.counted and point(p) == n]
        out.append(
            {
                keys[0]: n,
                "probes": len(values),
                keys[1]: values,
                f"{keys[1]}_spread": max(values) - min(values),
                "held": all(passes(v) for v in values),
                "disturbed": sum(1 for p in probes if point(p) == n and not p.counted),
            }
        )
    return out


def _limit(outcome: Outcome, counted: list[Probe], threshold: float, ceiling: int) -> dict[str, str]:
    """What stopped the search: the failing boundary probe's limit, what this host can emulate, or the ceiling."""
    if outcome.bound == "ceiling":
        return {
            "side": "undetermined",
            "reason": f"the workload's ceiling of {ceiling} accelerator(s) per host, which held",
        }
    if outcome.bound == "host":
        top = max((p for p in counted if p.accelerators == outcome.held), key=lambda p: p.au)
        why = top.limited_by["reason"] if top.limited_by else "no evidence recorded"
        return {"side": "client", "reason": f"this host's capacity: it emulates at most {outcome.held} rank(s) ({why})"}
    failing = next(p for p in counted if p.accelerators == outcome.failed and p.au < threshold)
    return failing.limited_by or {
        "side": "undetermined",
        "reason": "an unknown: the probes recorded no evidence of a limit",
    }


def fed_samples(
    run: Run,
    outcome: Outcome,
    probes: list[Probe],
    hosts: list[str],
    stored: list[Sample],
    started: float,
    ended: float,
    floor: int = STEP_FLOOR,
) -> list[Sample]:
    """accelerators_fed of a search: on each host and for all of them (host "*"); its value is the most that held.

    The metadata (`summary`) holds the interval (held, failed, bound), the point it stands for (`at`: the
    lowest-AU probe of the answer, or of 1 accelerator when even that failed), every point's probes and AU
    spread, what limited the search and its flags; a host's sample adds that host's figures at `at` and
    its run's validity.
    """
    workload = run.workload
    assert isinstance(workload, PytorchWorkload) and workload.accelerator  # a search's schema asks for both
    threshold = threshold_of(workload)
    common = summary(outcome, probes, threshold, workload.accelerators, floor)
    common["profile"] = profiles.recorded(workload.accelerator)  # the report's side by side converts with this one
    point = [s for s in stored if s.run_id == common["at"]["run_id"] and not s.params.get("syscall")]
    params = {k: v for k, v in run.params.items() if k != "accelerators"}
    params |= {"workload": run.workload.name, "accelerator_type": workload.accelerator.type, "au_threshold": threshold}

    def sample(host: str, metadata: dict[str, Any]) -> Sample:
        answer = Measurement("accelerators_fed", float(outcome.held), "count")
        return record.run_sample(run, host, answer, (started, ended), params, {**common, **metadata})

    per_host = []
    for host in hosts:
        mine = [s for s in point if s.host == host]
        figures = {s.metric: s.value for s in mine if s.metric in ("au", "read_bw", "samples_per_s")}
        per_host.append(
            sample(host, {"host_at": figures, "validity": mine[0].metadata.get("validity", {}) if mine else {}})
        )
    return per_host + [sample(AGGREGATE_HOST, {"hosts": hosts})]


def judged(probe: P, samples: list[Sample], hosts: list[str], stored: list[Sample], count: int) -> P:
    """The probe with what limited it, whether foreign CPU disturbed it and how many of what it counts (`count`
    of them per host: ranks, users) this host can emulate (iolab.measures.limits, from the run's telemetry and the
    backend's fio baseline in `stored`; no capacity without telemetry)."""
    ev = limits.evidence(samples, hosts, baseline=stored)
    return dataclasses.replace(  # type: ignore[type-var]
        probe,
        limited_by=dataclasses.asdict(limits.limited_by(ev)),
        disturbed=limits.disturbed(ev),
        capacity=limits.capacity(ev, count) if ev.cores else None,
    )


def stored_of(stored: list[Sample], run: Run, hosts: list[str], metric: str) -> list[Sample] | None:
    """A run's samples among `stored` (a syscall pass left out), or None unless every host in `hosts` has its
    `metric` (the figure a probe is judged by)."""
    samples = [s for s in stored if s.run_id == run.run_id and not s.params.get("syscall")]
    found = {s.host for s in samples if s.metric == metric}
    return samples if set(hosts) <= found else None


def _probe(n: int, repeat: int, run_id: str, samples: list[Sample], hosts: list[str]) -> Probe:
    """A probe from its run's samples: the lowest host AU, total samples/s and B/s, the slowest rank's steps."""
    mine = [s for s in samples if s.host in hosts]
    au = [s for s in mine if s.metric == "au"]
    steps = [s.metadata.get("steps_per_rank") for s in au]
    total = {m: sum(s.value for s in mine if s.metric == m) for m in ("samples_per_s", "read_bw")}
    return Probe(
        n,
        min(s.value for s in au),
        total["samples_per_s"],
        total["read_bw"],
        run_id,
        repeat,
        None if None in steps else min(int(x) for x in steps if x is not None),
    )
