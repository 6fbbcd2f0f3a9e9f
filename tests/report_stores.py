"""A store shaped like the main job's (`./lab bench.all` on campaigns/quick.yml), for the report's layout tests.

Its fio runs are the real ones of tests/fixtures/report/report-fixture (tmpfs against local disk, two
repetitions); to them it adds what the main job's accelerator search stores on each backend: the probes
(in the pytorch parser's shape, as tests/unit/test_accelerators_fed.py writes them, with the fixture host's
facts and a lab-scale data set, so that validity flags them potential_caching as it flags the main job's)
and the accelerators_fed answers that iolab.run.accelerators makes of them. tmpfs holds 6 H100s and fails 7,
limited by this host's CPU (flagged: it measures the host); local holds 2 and fails 3, limited by its
device, one probe disturbed by a foreign process. Probes at 1, 2 and 4 accelerators run on both backends:
"who wins" has rows for them that compare one probe with another (n=1).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from iolab.campaign import model as campaign
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample
from iolab.run import accelerators

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "report"
NAME = "report-fixture"
HOSTS = ["localhost"]
SEARCH = {
    "name": "resnet50-h100",
    "type": "pytorch",
    "reader": "packed",
    "batch_size": 32,
    "workers": 2,
    "accelerator": {"type": "h100"},
    "accelerators": 16,
    "search": "accelerators",
}
DATASET = {"kind": "imagenet-like", "files": 1536, "seed": 1}
DATASET_BYTES = 176_000_000  # 1,536 ImageNet-sized files
CLIENT = {"side": "client", "reason": "this host's CPU: 1.97 of 2 cores busy, run queue 5.1"}
STORAGE = {"side": "storage", "reason": "storage: device vda 100 % busy, read await 38 ms"}
DISTURBED = "foreign CPU: 0.61 cores busy outside the loader"
PROBED = 1795243800.0  # 2026-11-21T06:50:00Z, when the probes ran (after the fixture's fio runs)


def spec() -> campaign.Campaign:
    """The fixture's campaign with the main job's data set and search added."""
    raw = json.loads(json.dumps(_fixture_campaign()))
    raw["dataset"] = DATASET
    raw["workloads"].append(SEARCH)
    return campaign.parse(raw, "report_stores", FIXTURES)


def _fixture_campaign() -> dict:
    import yaml

    return yaml.safe_load((FIXTURES / "campaign.yml").read_text())


def _host_facts() -> dict:
    line = (FIXTURES / NAME / "samples.jsonl").read_text().splitlines()[0]
    return json.loads(line)["metadata"]["host"]


def probe_samples(
    probe: campaign.Run, au: dict[str, float], bw: float, steps: int = 500, facts: dict | None = None
) -> list[Sample]:
    """A stored probe in the pytorch parser's shape: each host reads `bw` B/s (100 kB a sample) at its AU, its
    slowest rank measured `steps` steps; `facts` joins each host's metadata; all hosts' read_bw as host "*"."""

    def sample(who: str, metric: str, value: float, unit: str) -> Sample:
        metadata = dict(facts or {}) | ({"steps_per_rank": steps, "cache_state": "dropped"} if metric == "au" else {})
        return Sample(
            campaign=probe.campaign,
            run_id=probe.run_id,
            repetition=probe.repetition,
            host=who,
            backend=probe.backend.name,
            workload=probe.workload.name,
            metric=metric,
            value=value,
            unit=unit,
            started_at="2026-11-21T06:50:00Z",
            ended_at="2026-11-21T06:50:12Z",
            params=probe.params,
            metadata=metadata if who != AGGREGATE_HOST else {},
        )

    per_host = [
        sample(h, m, v, u)
        for h in au
        for m, v, u in (("au", au[h], "%"), ("read_bw", bw, "B/s"), ("samples_per_s", bw / 1e5, "samples/s"))
    ]
    return per_host + [sample(AGGREGATE_HOST, "read_bw", bw * len(au), "B/s")]


def searched(backend: str, au_of: Callable[[int], float], bw_per_accelerator: float, limit: dict, disturbed: str = ""):
    """The samples one backend's search stores: its probes' and its accelerators_fed answer."""
    plan = spec()
    run = next(r for r in campaign.expand(plan) if r.backend.name == backend and r.workload.name == SEARCH["name"])
    probes: list[accelerators.Probe] = []
    stored: list[Sample] = []

    def probe(n: int) -> float:
        repeat = 1 + sum(1 for p in probes if p.accelerators == n)
        made = campaign.repetition(plan, run.backend, accelerators.probed(run.workload, n, 1), repeat)[0]
        facts = {"host": _host_facts(), "dataset_bytes": DATASET_BYTES, "ranks": [{"window_s": 9.0}]}
        samples = probe_samples(made, dict.fromkeys(HOSTS, au_of(n)), bw_per_accelerator * n, facts=facts)
        found = accelerators._probe(n, repeat, made.run_id, samples, HOSTS)
        noisy = disturbed if disturbed and n == 1 else None
        probes.append(dataclasses.replace(found, limited_by=limit, disturbed=noisy))
        stored.extend(samples)
        return found.au

    outcome = accelerators.search(probe, ceiling=SEARCH["accelerators"])
    return stored + accelerators.fed_samples(run, outcome, probes, HOSTS, stored, PROBED, PROBED + 600)


def main_job(root: Path, names: dict[str, str] | None = None) -> ResultStore:
    """results/report-fixture under `root`: the fixture's fio runs and both backends' searches; `names` renames
    backends and workloads in every sample (a vendor's longer names)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(FIXTURES / NAME, root / NAME)
    store = ResultStore(root, NAME)
    store.add_samples(searched("tmpfs", lambda n: 95.0 if n <= 6 else 82.0, 120e6, CLIENT))
    store.add_samples(searched("local", lambda n: 94.0 if n <= 2 else 71.0, 60e6, STORAGE, DISTURBED))
    if names:
        renamed = [
            dataclasses.replace(s, backend=names.get(s.backend, s.backend), workload=names.get(s.workload, s.workload))
            for s in store.samples()
        ]
        store.samples_path.unlink()
        store.add_samples(renamed)
    return store


KV_TRIALS = {  # backend → each trial's (read B/s, max-of-P95 s, tokens/s): kv-cache.py's run-to-run noise
    "vendor-a-nvme-east": [(1.47e9, 0.0712, 1012.0), (0.75e9, 0.0934, 987.5), (1.52e9, 0.0688, 1041.0)],
    "vendor-b-nvme-west": [(0.41e9, 0.2113, 333.3), (0.44e9, 0.1987, 351.2), (0.39e9, 0.2245, 327.9)],
}


def kv_cache(root: Path) -> ResultStore:
    """results/kv-fixture under `root`: three trials of one KV-cache point on each of two backends with a vendor's
    long names, and each backend's `kv_served` answer (8 users per client on the first, 2 on the second)."""
    from iolab.run import kvcache_search
    from iolab.run.accelerators import Outcome

    store = ResultStore(root, "kv-fixture")
    store.dir.mkdir(parents=True, exist_ok=True)
    params = {"mlperf_rules": True, "option": 1, "model": "llama3.1-8b", "users": 8, "clients": 2, "seed": 42}

    def sample(backend: str, run: str, rep: int, metric: str, value: float, unit: str, **extra) -> Sample:
        at = f"2026-11-22T0{rep}:00:00Z"
        return Sample("kv-fixture", run, rep, AGGREGATE_HOST, backend, "kv-llama", metric, value, unit, at, at, extra)

    samples = []
    for index, (backend, trials) in enumerate(KV_TRIALS.items()):
        for rep, (read, p95, tokens) in enumerate(trials, 1):
            run = f"{index}{rep}"
            for metric, value, unit in (("read_bw", read, "B/s"), ("kv_read_p95_max", p95, "s")):
                samples.append(sample(backend, run, rep, metric, value, unit, **params))
            samples.append(sample(backend, run, rep, "tokens_per_s", tokens, "tokens/s", **params))
        held = 8 if index == 0 else 2
        limit = {"side": "storage", "reason": "storage: device nvme0n1 97 % busy, read await 12 ms"}
        probes = [
            kvcache_search.Probe(n, 0.1 if n <= held else 0.3, 1e9 * n, 100.0 * n, f"p{index}{n}", limited_by=limit)
            for n in (1, 2, 4, 8)
            if n <= held * 2
        ]
        outcome = Outcome(held, None, "ceiling", ()) if held == 8 else Outcome(held, 4, None, ())
        meta = kvcache_search.summary(outcome, probes, 0.2, 8, "user(s) per client")
        served = sample(backend, f"s{index}", 1, "kv_served", float(held), "count", search="users")
        served.metadata.update(meta)
        samples.append(served)
    store.add_samples(samples)
    return store
