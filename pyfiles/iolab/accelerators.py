"""bench.accelerators: the most emulated accelerators per host that a backend keeps at AU ≥ 90%.

MLPerf Storage's figure of merit: how many accelerators a storage system feeds while
each stays busy at least 90% of the time (docs/REFERENCE_FIGURES.md). The search doubles
N (1, 2, 4, …) until a probe falls below the threshold, then bisects between the
last N that held and the first that did not. Each probe is one short run of the
PyTorch loader with N emulated accelerators on every selected host (one rank
process each, as DLIO runs one MPI rank per accelerator); its AU is the lowest of
the hosts' (a host's AU is the mean of its ranks'). The backend is mounted and the
data set made once for the whole search. Probes are stored as runs of the campaign
`accelerators-<backend>-<type>`, so a search that is run again reuses them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iolab import bench, datasets, runner
from iolab.campaign import Campaign, Run, expand, parse
from iolab.errors import RunFailed, UserError
from iolab.samples import ResultStore

THRESHOLD = 90.0


@dataclasses.dataclass(frozen=True)
class Probe:
    accelerators: int
    au: float  # the lowest host AU, %
    samples_per_s: float  # all hosts together
    read_bw: float  # all hosts together, B/s


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
    lab: bench.Lab,
    results: Path,
    backend: str,
    accelerator: dict[str, Any],
    workload: dict[str, Any],
    limit: int,
    threshold: float = THRESHOLD,
    show: Callable[[str], None] = print,
) -> tuple[int, list[Probe]]:
    """Mount the backend, make the data set, probe N accelerators per host as `search` asks; unmount."""
    probes: dict[int, Probe] = {}
    first = probe_campaign(spec, backend, accelerator, workload, [1])
    store = ResultStore(results, first.name)
    hosts = list(lab.hosts)
    setup = lab.play(runner.Phase("setup.yml", {"iolab_host_dl": True}), "setup")
    if setup.failures() or setup.status != "successful":
        raise RunFailed(f"provisioning the hosts failed: {setup.summary()}")
    mount = lab.play(bench.storage_phase(first, backend, "mounted"), f"mount {backend}")
    try:
        if mount.failures() or mount.status != "successful":
            raise RunFailed(f"mounting {backend} failed: {mount.summary()}")
        missing = datasets.make(lab, first, backend, expand(first), hosts)
        if missing:
            raise RunFailed("; ".join(f"{h}: {why}" for h, why in missing.items()))

        def probe(n: int) -> float:
            run = expand(probe_campaign(spec, backend, accelerator, workload, [n]))[0]
            found = _stored(store, run, hosts)
            if found is None:
                result = bench.play_run(
                    lab,
                    [bench.run_phase(run)],
                    run,
                    store.raw_dir(run.run_id),
                    f"probe: {n} accelerator(s) per host",
                    hosts,
                )
                failures, _ = bench.record_run(store, run, result, hosts)
                if failures:
                    raise RunFailed(f"the probe with {n} accelerator(s) per host failed: {failures[0]}")
                found = _stored(store, run, hosts)
                assert found is not None
            probes[n] = Probe(n, *found)
            show(
                f"  {n:>4} accelerator(s) per host: AU {found[0]:5.1f} %  "
                f"{'ok' if found[0] >= threshold else 'below ' + format(threshold, 'g') + ' %'}  "
                f"({found[1]:.0f} samples/s, {found[2] / 2**20:.0f} MiB/s over {len(hosts)} host(s))"
            )
            return found[0]

        best, _ = search(probe, threshold, limit)
    finally:
        lab.play(
            bench.storage_phase(first, backend, "unmounted", stop_tools=True), f"unmount {backend}", cancellable=False
        )
    return best, [probes[n] for n in sorted(probes)]


def _stored(store: ResultStore, run: Run, hosts: list[str]) -> tuple[float, float, float] | None:
    """(lowest host AU, total samples/s, total B/s) of a stored run on every host, or None."""
    samples = [s for s in store.samples() if s.run_id == run.run_id and s.host in hosts]
    au = {s.host: s.value for s in samples if s.metric == "au"}
    if set(au) != set(hosts):
        return None
    total = {m: sum(s.value for s in samples if s.metric == m) for m in ("samples_per_s", "read_bw")}
    return min(au.values()), total["samples_per_s"], total["read_bw"]
