"""The KV-cache workload in a campaign: refusals before any host, MLPerf's CLOSED options and flags, the search's
answer, the report's trials and the v3.0 kv_cache leaf. Samples here are made by hand; the leaf's rank files are
the real ones of tests/fixtures/kvcache."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from iolab.campaign.model import expand, parse
from iolab.errors import UserError
from iolab.kinds.kvcache.workload import LATENCY_BOUND
from iolab.measures import validity
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample
from iolab.report import kvcache as report_kvcache
from iolab.report import mlperf_kv as report_mlperf_kv
from iolab.run import kvcache_search
from iolab.run.accelerators import Outcome
from iolab.workloads.kvcache_rules import OPTIONS, run_rules

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kvcache"
BACKENDS = [{"name": "t", "type": "tmpfs", "size": "1GiB"}]


def load(workload: dict, memory=None, **campaign):
    raw = {"name": "kv", "backends": BACKENDS, "workloads": [{"name": "kv", "type": "kvcache", **workload}]}
    return parse({**raw, **campaign}, "kv.yml", Path("."), memory=memory)


@pytest.mark.parametrize(
    ("workload", "memory", "said"),
    [
        ({"model": "custom", "layers": 32, "kv_heads": 8}, None, "model custom needs its shape: layers, kv_heads"),
        ({"layers": 32}, None, "layers: a shape of its own is model: custom"),
        ({"users": 0}, None, "users: Input should be greater than or equal to 1"),
        ({"seed": -1}, None, "seed -1: give a whole number from 0 to 4294967295"),
        ({"seed": 2**32, "engine": "mlperf-kvcache", "kvcache_source": "/srv/kv"}, None, "seed 4294967296: give"),
        ({"cpu_bytes": "20GiB", "clients": 2}, lambda: [16 << 30], "tiers take 40 GiB on each host"),
        ({"search": "users", "latency_bound": "0.1ms"}, None, "latency_bound 0.0001 s can never hold"),
        ({"latency_bound": "100ms"}, None, "latency_bound is the search's"),
        ({"engine": "mlperf-kvcache"}, None, "which iolab does not ship: give kvcache_source"),
        ({"engine": "mlperf-kvcache", "kvcache_source": "git+https://x/storage"}, None, "pin the git source"),
        ({"kvcache_source": "/srv/kv"}, None, "kvcache_source is what engine mlperf-kvcache installs"),
    ],
)
def test_bad_input_is_refused_in_one_line_before_any_host(workload, memory, said):
    with pytest.raises(UserError) as refused:
        load(workload, memory)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_a_tier_is_checked_against_the_hosts_memory_only_where_read():
    assert load({"cpu_bytes": "20GiB"}, lambda: [None]).workloads[0].settled("cpu_bytes") == 20 << 30  # a dry run
    assert load({"cpu_bytes": "4GiB"}, lambda: [16 << 30, 32 << 30])


def test_an_option_fills_what_the_file_leaves_out_and_trials_are_runs():
    runs = expand(load({"option": 3, "users": 8, "trials": 2}))
    assert [r.repetition for r in runs] == [1, 2]
    params = runs[0].params
    assert params["model"] == "llama3.1-70b" and params["users"] == 8 and params["concurrent_allocs"] == 4
    assert params["per_token_bytes"] == 320 << 10


def test_mlperf_true_runs_the_three_closed_options_three_times_with_the_locks():
    runs = expand(load({}, mlperf=True))
    assert sorted({r.workload.option for r in runs}) == [1, 2, 3] and len(runs) == 9
    assert {r.workload.settled("duration") for r in runs} == {300.0} and {r.workload.seed for r in runs} == {42}
    assert all(run_rules(r.params, 3) == [] for r in runs)
    assert runs[0].workload.repetition_vars(1)["bench_kvcache_pause"] == 90.0
    assert runs[0].workload.repetition_vars(2)["bench_kvcache_pause"] == 0.0


def test_each_deviation_is_flagged_by_the_rules_number():
    run = expand(load({"users": 4, "duration": "60s", "context_scale": 0.0625}, mlperf=True))[0]
    flags = dict(run_rules(run.params, 1))
    assert set(flags) == {"mlperf_kv_option", "mlperf_kv_fixed", "mlperf_kv_sequence"}
    assert "users 4 (option 1: 200)" in flags["mlperf_kv_option"] and "context_scale" in flags["mlperf_kv_fixed"]
    assert OPTIONS[2]["cpu_bytes"] == 4 << 30
    without = expand(load({"users": 4}))[0]
    assert run_rules(without.params, 1) == []  # no rules asked, none checked


def _sample(run: str, rep: int, metric: str, value: float, unit: str, host: str = AGGREGATE_HOST, **params):
    base = {"mlperf_rules": True, "option": 1, "model": "llama3.1-8b", "users": 2, "clients": 2, "seed": 42}
    return Sample(
        "kv", run, rep, host, "t", "kv", metric, value, unit, f"2026-01-0{rep}T10:00:00Z", f"2026-01-0{rep}T10:05:00Z",
        {**base, **params}, {}
    )  # fmt: skip


TRIALS = [(1, 1.0e9, 0.150), (2, 1.2e9, 0.120), (3, 2.6e9, 0.300)]  # (trial, read B/s, max-of-P95 s)


def _trials() -> list[Sample]:
    out = []
    for rep, read, p95 in TRIALS:
        out += [_sample(f"r{rep}", rep, "read_bw", read, "B/s"), _sample(f"r{rep}", rep, "kv_read_p95_max", p95, "s")]
        out += [_sample(f"r{rep}", rep, "tokens_per_s", 100.0 * rep, "tokens/s")]
    return out


def test_the_trials_show_median_spread_and_how_far_the_rules_mean_sits():
    (row,) = report_kvcache.trial_rows(_trials())
    read, p95 = row["read_bw"], row["kv_read_p95_max"]
    assert row["trials"] == 3 and (read["median"], read["min"], read["max"]) == (1.2e9, 1.0e9, 2.6e9)
    assert read["rules"] == pytest.approx(1.6e9) and row["mean_from_median"] == pytest.approx(1 / 3)
    assert (p95["median"], p95["rules"]) == (0.150, 0.300)  # the rules' latency figure: the most over trials
    assert report_kvcache.trials_table(_trials()) is not None


def _probe(n: int, p95: float, repeat: int = 1) -> kvcache_search.Probe:
    limit = {"side": "storage", "reason": "storage: device vda 95 % busy"}
    return kvcache_search.Probe(n, p95, 1e9 * n, 100.0 * n, f"run{n}.{repeat}", repeat, limited_by=limit)


def test_the_answer_says_its_interval_the_figures_at_it_and_what_limited_it():
    probes = [_probe(1, 0.05), _probe(2, 0.1), _probe(4, 0.3), _probe(3, 0.25)]
    probes += [_probe(2, 0.12, 2), _probe(3, 0.26, 2), _probe(2, 0.11, 3), _probe(3, 0.27, 3)]
    meta = kvcache_search.summary(Outcome(2, 3, None, ()), probes, LATENCY_BOUND, 8, "user(s) per client")
    assert meta["at"]["p95"] == 0.12 and meta["limited_by"]["side"] == "storage"
    assert [p["held"] for p in meta["points"]] == [True, True, False, False]
    line = kvcache_search.answer(meta, "tmpfs", 1)
    assert line.startswith(
        "answer: 2 user(s) per client (2–3) on tmpfs (max-of-P95 read 120.0 ms, the worst of its 3 probes, ≤ 200 ms"
    )
    assert "limited by storage: device vda 95 % busy" in line


def test_the_report_leads_with_the_answer():
    probes = [_probe(1, 0.05), _probe(2, 0.3), _probe(1, 0.06, 2), _probe(2, 0.31, 2), _probe(1, 0.07, 3)]
    probes.append(_probe(2, 0.29, 3))
    meta = kvcache_search.summary(Outcome(1, 2, None, ()), probes, LATENCY_BOUND, 4, "user(s) per client")
    served = _sample("s", 1, "kv_served", 1.0, "count")
    served.metadata.update(meta)
    (row,) = report_kvcache.verdict_rows([served])
    assert row["label"] == "1 user(s) per client (1–2)" and row["p95_range"] == (0.05, 0.07, 3)
    page = report_kvcache.page([served])
    assert page and page["rows"][0]["cells"][2] == row["label"] and "≤ 200 ms" in page["title"]
    assert "limited by storage" in page["limits"][0][0]
    # A flag of the answer is a name in its cell and a note under the table, on the terminal and on the page.
    served.metadata["flags"] = ["measures this host, not the storage: every probe's client CPU was saturated"]
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(report_kvcache.verdict_table([served]))
    text = console.export_text()
    assert "⚑ host-bound" in text and "[1] host-bound: measures this host, not the storage" in text
    assert max(map(len, text.splitlines())) <= 80
    page = report_kvcache.page([served])
    assert page and [c.name for c in page["rows"][0]["cites"]] == ["host-bound"] and len(page["notes"]) == 1


def test_the_kv_cache_leaf_of_the_results_tree(tmp_path):
    store = ResultStore(tmp_path, "kv")
    samples = _trials()
    for rep, _, _ in TRIALS:  # each trial's raw rank files: the iolab fixture's, as a run's host brings them back
        shutil.copytree(FIXTURES / "iolab", store.raw_dir(f"r{rep}") / "h1")
        meta = json.loads((FIXTURES / "iolab" / "kvcache_run_summary.json").read_text())
        samples.append(_sample(f"r{rep}", rep, "read_bw", 1.0, "B/s", host="h1"))
        samples[-1].metadata["kv_ranks"] = meta["ranks"]
    text = report_mlperf_kv.text(store, samples)
    leaf = Path(text.splitlines()[-1].removeprefix("written: "))
    assert leaf.relative_to(store.dir).parts[:7] == (
        "mlperf",
        "open",
        "iolab",
        "results",
        "t",
        "kv_cache",
        "llama3.1-8b",
    )
    assert leaf.parent.name == "run" and len(leaf.name) == len("YYYYMMDD_HHMMSS")
    summary = json.loads((leaf / "summary.json").read_text())
    option = summary["options"]["1"]
    assert option["aggregated_read_bandwidth_gbps"] == pytest.approx(1.6e9 / 2**30)
    assert option["aggregated_device_read_p95_ms"] == pytest.approx(300.0) and option["trial_count"] == 3
    assert len(list(leaf.glob("option_1/trial_*/rank_*/kvcache_results_*.json"))) == 6
    metadata = json.loads(next(leaf.glob("kv_cache_*_metadata.json")).read_text())
    assert metadata["division"] == "open" and any("6.3.1.1" in why for why in metadata["rules_broken"])
    assert "| t | 1 | llama3.1-8b |" in text
    assert validity.assess(samples).of("r1")  # the rules it breaks are flagged


def test_an_rbd_scratch_image_takes_the_workload_a_snapshot_refuses_it():
    scratch = {"name": "r", "type": "rbd_snapshot", "scratch": True}
    campaign = parse(
        {"name": "kv", "backends": [scratch], "workloads": [{"name": "kv", "type": "kvcache"}]}, "kv.yml", Path(".")
    )
    assert campaign.backends[0].writable and expand(campaign)
    with pytest.raises(UserError, match="backend r is mounted read-only|writes"):
        parse(
            {
                "name": "kv",
                "backends": [{**scratch, "scratch": False, "source": "/srv/d"}],
                "workloads": [{"name": "kv", "type": "kvcache"}],
            },
            "kv.yml",
            Path("."),
        )
    with pytest.raises(UserError, match="scratch: true maps the image itself read-write"):
        parse({"name": "kv", "backends": [{**scratch, "fio_size": "1GiB"}], "workloads": [FIO]}, "kv.yml", Path("."))


FIO = {"name": "f", "type": "fio", "profile": "seq-read-1m"}
