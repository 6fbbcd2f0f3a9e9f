"""bench.accelerators: the most emulated accelerators per host that a backend keeps at MLPerf's AU threshold.

MLPerf Storage's figure of merit: how many accelerators a storage system feeds while
each stays busy at least its model's AU threshold of the time (90 % for unet3d and
resnet50, 85 % for retinanet, 70 % for cosmoflow: docs/REFERENCE_FIGURES.md). The search doubles
N (1, 2, 4, …) until a probe falls below the threshold, then bisects between the
last N that held and the first that did not. Each probe is one short run of the
PyTorch loader with N emulated accelerators on every selected host (one rank
process each, as DLIO runs one MPI rank per accelerator); its AU is the lowest of
the hosts' (a host's AU is the mean of its ranks'). The backend is mounted and the
data set made once for the whole search. Probes are stored as runs of the campaign
`accelerators-<backend>-<type>`, so a search that is run again reuses them.

In a campaign, a pytorch workload with `search: accelerators` is the same search on
each backend, up to its `accelerators` per host (`fed`): the probes are runs of that
campaign (the workload at 1, 2, 4 … accelerators), and the answer is the sample
`accelerators_fed` (unit count) with the AU and throughput at that point.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iolab import record
from iolab.campaign import Campaign, Run, expand, parse, repetition
from iolab.errors import RunFailed, UserError
from iolab.execute import Lab
from iolab.parsers import Measurement
from iolab.progress import Progress
from iolab.samples import AGGREGATE_HOST, ResultStore, Sample
from iolab.session import BackendSession, CampaignState
from iolab.workloads.mlperf import PRESETS
from iolab.workloads.pytorch import PytorchWorkload

THRESHOLD = 90.0  # % AU, where the workload names no MLPerf model with a threshold of its own


def threshold_of(workload: PytorchWorkload) -> float:
    """The AU a probe must hold: MLPerf's threshold for the accelerator's model (retinanet 85 %), else THRESHOLD."""
    preset = PRESETS.get(workload.accelerator.model) if workload.accelerator else None
    return preset.au_threshold if preset else THRESHOLD


@dataclasses.dataclass(frozen=True)
class Probe:
    accelerators: int
    au: float  # the lowest host AU, %
    samples_per_s: float  # all hosts together
    read_bw: float  # all hosts together, B/s
    run_id: str = ""


def search(
    probe: Callable[[int], float], threshold: float = THRESHOLD, limit: int = 64
) -> tuple[int, list[tuple[int, float]]]:
    """The largest N ≤ limit with probe(N) ≥ threshold (0 if even 1 fails), and every (N, AU) probed.

    >>> search(lambda n: 100 if n <= 5 else 50)
    (5, [(1, 100), (2, 100), (4, 100), (8, 50), (6, 50), (5, 100)])
    """
    history: list[tuple[int, float]] = []

    def holds(n: int) -> bool:
        au = probe(n)
        history.append((n, au))
        return au >= threshold

    good, bad, n = 0, None, 1
    while n <= limit:
        if not holds(n):
            bad = n
            break
        good, n = n, n * 2
    if bad is None:
        if good == limit:
            return good, history
        if holds(limit):
            return limit, history
        bad = limit
    while bad - good > 1:
        mid = (good + bad) // 2
        if holds(mid):
            good = mid
        else:
            bad = mid
    return good, history


def probe_campaign(
    spec: Campaign, backend: str, accelerator: dict[str, Any], workload: dict[str, Any], counts: list[int]
) -> Campaign:
    """A campaign of one pytorch workload swept over `counts` accelerators, on one backend of `spec`."""
    if spec.dataset is None:
        raise UserError(
            f"campaign {spec.name} has no dataset: bench.accelerators reads the campaign's data set; "
            "add dataset: {kind: imagenet-like, files: N, seed: S}"
        )
    chosen = next((b for b in spec.backends if b.name == backend), None)
    if chosen is None:
        raise UserError(
            f"backend {backend!r} is not in campaign {spec.name} (it has: "
            f"{', '.join(b.name for b in spec.backends)}); pass --backend NAME"
        )
    raw = {
        "name": f"accelerators-{backend}-{accelerator['type']}",
        "backends": [chosen.model_dump(exclude_none=True)],
        "dataset": spec.dataset.model_dump(),
        "workloads": [
            {"name": "probe", "type": "pytorch", **workload, "accelerator": accelerator, "accelerators": counts}
        ],
    }
    return parse(raw, "bench.accelerators flags", Path.cwd())


def run_search(
    spec: Campaign,
    lab: Lab,
    results: Path,
    backend: str,
    accelerator: dict[str, Any],
    workload: dict[str, Any],
    limit: int,
    threshold: float = THRESHOLD,
    show: Callable[[str], None] = print,
) -> tuple[int, list[Probe]]:
    """Provision the hosts, mount the backend and make the data set (one playbook), probe N accelerators per
    host as `search` asks, unmount: a backend session (iolab.session) of the probes' campaign."""
    first = probe_campaign(spec, backend, accelerator, workload, [1])
    state = CampaignState(first, lab, ResultStore(results, first.name), Progress([], lab.console))
    hosts = list(lab.hosts)
    with BackendSession(state, backend, hosts, expand(first)) as session:
        session.flush()
        session.require(hosts)
        return probe_until(
            session,
            lambda n: expand(probe_campaign(spec, backend, accelerator, workload, [n]))[0],
            hosts,
            limit,
            threshold,
            show,
        )


def probe_until(
    session: BackendSession,
    run_of: Callable[[int], Run],
    hosts: list[str],
    limit: int,
    threshold: float = THRESHOLD,
    show: Callable[[str], None] = print,
) -> tuple[int, list[Probe]]:
    """Probe N accelerators per host (the run `run_of(N)`, stored or run now) as `search` asks.

    The session's backend is mounted and the data set made. Returns search's answer and every
    probe, by N; a failed probe stops the search (RunFailed).
    """
    store = session.state.store
    probes: dict[int, Probe] = {}

    def probe(n: int) -> float:
        run = run_of(n)
        found = _stored(store, run, hosts)
        if found is None:
            failures, _, _ = session.measure(run, f"probe: {n} accelerator(s) per host", hosts)
            if failures:
                raise RunFailed(f"the probe with {n} accelerator(s) per host failed: {failures[0]}")
            found = _stored(store, run, hosts)
            assert found is not None
        probes[n] = Probe(n, *found, run_id=run.run_id)
        show(
            f"  {n:>4} accelerator(s) per host: AU {found[0]:5.1f} %  "
            f"{'ok' if found[0] >= threshold else 'below ' + format(threshold, 'g') + ' %'}  "
            f"({found[1]:.0f} samples/s, {found[2] / 2**20:.0f} MiB/s over {len(hosts)} host(s))"
        )
        return found[0]

    best, _ = search(probe, threshold, limit)
    return best, [probes[n] for n in sorted(probes)]


def fed(session: BackendSession, run: Run, hosts: list[str]) -> None:
    """A campaign's `search: accelerators` run on the session's mounted backend: probe, then store
    `accelerators_fed` (on each host and for all of them, host "*"); a failure is the session's.

    Each probe is a run of the campaign: the run's workload at N accelerators per host
    (a probe stored by an earlier call is reused).
    """
    workload = run.workload
    assert isinstance(workload, PytorchWorkload) and workload.accelerator  # a search's schema asks for both
    active = session.admit(run, hosts, batched=False)
    if not active:
        return
    title = session.start(run)
    console, store = session.state.lab.console, session.state.store
    threshold = threshold_of(workload)
    console.print(
        f"{title}: searching the most {workload.accelerator.type} accelerators per host at "
        f"AU ≥ {threshold:g} % (up to {workload.accelerators})",
        soft_wrap=True,
    )

    def run_of(n: int) -> Run:
        return repetition(
            session.state.campaign, run.backend, workload.model_copy(update={"accelerators": n}), 1, run.hosts
        )[0]

    started = time.time()
    try:
        best, probes = probe_until(
            session, run_of, active, workload.accelerators, threshold, lambda line: console.print(line, soft_wrap=True)
        )
    except RunFailed as exc:
        record.store_run(store, run, [], dict.fromkeys(active, str(exc)))
        session.finish(run, title, active, [f"{run.label()}: {exc}"], [], None)
        return
    samples = fed_samples(run, best, probes, active, store.samples(), started, time.time())
    record.store_run(store, run, samples, dict.fromkeys(active))
    session.finish(run, title, active, [], samples, None)


def answer(best: int, probes: list[Probe], kind: str, backend: str, threshold: float, hosts: int) -> str:
    """bench.accelerators' last line: the answer, with the AU and throughput at it."""
    if best == 0:
        return f"answer: none — even 1 {kind} accelerator per host falls below {threshold:g} % AU on {backend}"
    held = next(p for p in probes if p.accelerators == best)
    return (
        f"answer: {best} {kind} accelerator(s) per host on {backend} (AU {held.au:.1f} %, "
        f"{held.samples_per_s:.0f} samples/s, {held.read_bw / 2**20:.0f} MiB/s over {hosts} host(s))"
    )


def fed_samples(
    run: Run, best: int, probes: list[Probe], hosts: list[str], stored: list[Sample], started: float, ended: float
) -> list[Sample]:
    """accelerators_fed of a search: on each host and for all of them (host "*").

    The metadata holds the point it stands for (`at`: the answer, or the 1-accelerator
    probe when even that fell below the threshold) with its AU and throughput, and
    every probe; a host's sample adds that host's figures and its run's validity.
    """
    workload = run.workload
    assert isinstance(workload, PytorchWorkload) and workload.accelerator  # a search's schema asks for both
    at = next(p for p in probes if p.accelerators == max(best, 1))
    point = [s for s in stored if s.run_id == at.run_id and not s.params.get("syscall")]
    params = {k: v for k, v in run.params.items() if k != "accelerators"}
    params |= {
        "workload": run.workload.name,
        "accelerator_type": workload.accelerator.type,
        "au_threshold": threshold_of(workload),
    }
    common = {
        "at": dataclasses.asdict(at),
        "probes": [dataclasses.asdict(p) for p in probes],
        "limit": workload.accelerators,
    }

    def sample(host: str, metadata: dict[str, Any]) -> Sample:
        answer = Measurement("accelerators_fed", float(best), "count")
        return record.run_sample(run, host, answer, (started, ended), params, {**common, **metadata})

    per_host = []
    for host in hosts:
        mine = [s for s in point if s.host == host]
        figures = {s.metric: s.value for s in mine if s.metric in ("au", "read_bw", "samples_per_s")}
        per_host.append(
            sample(host, {"host_at": figures, "validity": mine[0].metadata.get("validity", {}) if mine else {}})
        )
    return per_host + [sample(AGGREGATE_HOST, {"hosts": hosts})]


def _stored(store: ResultStore, run: Run, hosts: list[str]) -> tuple[float, float, float] | None:
    """(lowest host AU, total samples/s, total B/s) of a stored run on every host, or None."""
    samples = [s for s in store.samples() if s.run_id == run.run_id and s.host in hosts]
    au = {s.host: s.value for s in samples if s.metric == "au"}
    if set(au) != set(hosts):
        return None
    total = {m: sum(s.value for s in samples if s.metric == m) for m in ("samples_per_s", "read_bw")}
    return min(au.values()), total["samples_per_s"], total["read_bw"]
