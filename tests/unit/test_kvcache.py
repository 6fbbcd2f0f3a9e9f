"""The KV-cache workload's model and host side: KV bytes, the reference's users, the tiers, the summary and parser.

The fixtures under tests/fixtures/kvcache are real outputs of this session's runs: iolab's clients
(`iolab/`) and MLCommons' kv-cache.py through iolab.kinds.kvcache.host_reference (`mlperf/`, 2 ranks of 2 users,
Llama-3.1-8B at context scale 1/32, 4 s; docs/PERFORMANCE.md says how they were made).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import statistics
from pathlib import Path

import pytest

from iolab.host.kvcache_sim import DECODE_BATCH, Rank, Request, draw_users
from iolab.host.kvcache_tiers import FILL_LIMIT, Settings, Stats, Tiers
from iolab.kinds.kvcache import host as kvcache
from iolab.kinds.kvcache import host_reference as mlperf_kvcache
from iolab.kinds.kvcache import parser as parser
from iolab.run.accelerators import search
from iolab.shared.kvcache_model import MODELS, bytes_per_token, entry_bounds, templates

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kvcache"
SCALE = 1 / 32


def test_kv_bytes_per_token_of_the_presets():
    """layers × KV heads × head dimension × 2 (K and V) × 2 B: 128 KiB for Llama-3.1-8B, 320 KiB for 70B."""
    assert bytes_per_token(*MODELS["llama3.1-8b"]) == 128 << 10
    assert bytes_per_token(*MODELS["llama3.1-70b"]) == 320 << 10


def test_context_scale_shrinks_the_templates_and_the_entries():
    assert templates(1.0)["coding"][0] == (4096, 25000)
    assert templates(SCALE)["coding"][0] == (128, 781)
    fewest, most = entry_bounds(128 << 10, 1.0)
    assert (fewest, most) == (128 + (512 // 4 - 9) * (128 << 10), 128 + 25000 * (128 << 10))


def test_users_are_the_references_own_draws():
    """The same seed draws the same users as kv-cache.py: its log prints their contexts and QoS (fixture)."""
    log = (FIXTURES / "mlperf" / "rank_0" / "kv-cache.log").read_text()
    low, high, mean = (int(re.search(rf"{k}: (\d+) tokens", log).group(1)) for k in ("Min", "Max", "Mean"))
    users = draw_users(2, 42, SCALE)
    contexts = [u.context for u in users]
    assert (min(contexts), max(contexts), f"{statistics.fmean(contexts):.0f}") == (low, high, str(mean))
    interactive = int(re.search(r"interactive: (\d+) users", log).group(1))
    assert sum(1 for u in users if u.priority == 3) == interactive


def _tiers(tmp_path: Path, storage: float, cpu: int = 0) -> Tiers:
    settings = Settings(2, 1, 64, users=1, duration=1.0, seed=7, cpu_bytes=cpu, context_scale=SCALE)
    return Tiers(settings, tmp_path, storage, Stats())


def test_an_entry_is_a_whole_npy_file_fsynced_and_read_back(tmp_path):
    tiers = _tiers(tmp_path, storage=1 << 30)
    tier, took = tiers.allocate("a", 100)
    assert tier == "storage" and took > 0
    path = tmp_path / "a.npy"
    assert path.stat().st_size == 128 + 100 * 2 * 1 * 64 * 2 * 2  # np.save's header, then the fp16 array
    assert tiers.access("a")[0] == "storage" and tiers.access("missing") == (None, 0.0)
    assert tiers.stats.counts["hits"] == 1 and tiers.stats.counts["misses"] == 1
    assert tiers.stats.latency["storage_read_device"] and tiers.stats.latency["storage_write_device"]


def test_no_4k_block_repeats_within_or_across_entries(tmp_path):
    tiers = _tiers(tmp_path, storage=1 << 30)
    blocks = set()
    for key in ("a", "b"):
        raw = tiers.make(key, 256).tobytes()
        for start in range(0, len(raw) - 4096 + 1, 4096):
            blocks.add(raw[start : start + 4096])
    assert len(blocks) == 2 * (256 * 2 * 64 * 2 * 2 // 4096)


def test_the_storage_tier_evicts_its_least_recently_used_entries_at_its_budget(tmp_path):
    size = 128 + 100 * 512
    tiers = _tiers(tmp_path, storage=3 * size)
    for key in "abc":
        tiers.allocate(key, 100)
    tiers.access("a")  # b is now the least recently used
    tiers.allocate("d", 100)
    assert sorted(p.stem for p in tmp_path.glob("*.npy")) == ["a", "c", "d"]
    assert tiers.stats.counts["evicted"] == 1


def test_a_full_cpu_tier_demotes_to_storage(tmp_path):
    size = 128 + 100 * 512
    tiers = _tiers(tmp_path, storage=1 << 30, cpu=3 * size)
    assert [tiers.allocate(k, 100)[0] for k in "ab"] == ["cpu", "cpu"]
    tiers.allocate("c", 100)  # over 80 % of the CPU tier: its least recently used entry goes down
    assert tiers.entries["a"].tier == "storage" and (tmp_path / "a.npy").exists()
    assert tiers.stats.counts["demoted"] >= 1
    assert tiers.stats.bytes[("storage", "write")] == 0  # a demotion is not the workload's write (the reference's)


def test_a_request_taken_before_the_duration_ends_does_all_its_reads_as_the_references(tmp_path):
    """kv-cache.py lets a request in flight when the duration ends do every read it has left, and its figures
    count them; iolab's clients did none of them (docs/PERFORMANCE.md: what that did to the figures)."""
    rank = Rank(Settings(2, 1, 64, users=1, duration=1.0, seed=7, context_scale=SCALE), tmp_path, 1 << 30)
    user = draw_users(1, 7, SCALE)[0]
    conversation = rank.conversations.start(user.name)
    for _ in range(3):  # three earlier turns, each an entry on the storage
        rank.tiers.allocate(rank.conversations.add_turn(conversation)[1], 40)
    turn, key = rank.conversations.add_turn(conversation)
    rank.stop.set()  # the duration is over: the request was taken before
    rank._serve(Request(user, key, conversation, turn, 40, 100, prefill_only=False), random.Random(1))
    decode = -(-100 // DECODE_BATCH)
    assert len(rank.stats.latency["storage_read_device"]) == 3 + 1 + decode  # the turns, the entry, its decode


def test_each_run_draws_its_requests_afresh_from_the_same_users(tmp_path):
    """The seed fixes the users, not what they ask: two runs' first requests differ in size, as two of the
    reference's runs do (a request stream fixed by the seed made every trial the same small-entry sample)."""
    first = []
    for run in (1, 2):
        (tmp_path / str(run)).mkdir()
        rank = Rank(Settings(2, 1, 64, users=1, duration=2.0, seed=42), tmp_path / str(run), 1 << 30)
        rank.run()
        first.append(rank.tiers.entries["conv_user_0000_0_turn_1"].size)  # its user's first request
        rank.tiers.clear()
    assert first[0] != first[1]


def test_no_write_takes_the_file_system_past_nine_tenths(tmp_path, monkeypatch):
    """Before each storage write: this rank's LRU files go until the entry fits under FILL_LIMIT, else the write
    fails (an error) — the real file system's share is what decides (here made to read 95 % full, a fake: the
    integration test fills a real tmpfs)."""
    tiers = _tiers(tmp_path, storage=1 << 30)
    tiers.allocate("a", 100)
    assert tiers._filled() < FILL_LIMIT  # this disk, as statvfs reads it
    monkeypatch.setattr(Tiers, "_filled", lambda self, size=0: 0.95)
    assert tiers.allocate("b", 100) == (None, 0.0)
    assert not list(tmp_path.glob("*.npy")) and tiers.stats.counts["errors"] == 1


@pytest.mark.parametrize("engine", ["iolab", "mlperf"])
def test_the_summary_adds_the_ranks_up_as_the_rules_do(engine, tmp_path):
    """Rule 6.3.4: read and write GiB/s and tokens/s summed over the ranks, the device P95s the most of theirs."""
    run = shutil.copytree(FIXTURES / engine, tmp_path / engine)
    written = json.loads((run / kvcache.SUMMARY).read_text())
    summary = kvcache.summarize(run, 2, written["tool"], 0)
    option = summary["options"]["0"]
    ranks = [json.loads(next((run / f"rank_{k}").glob("kvcache_results_*.json")).read_text()) for k in (0, 1)]
    stats = [r["summary"]["cache_stats"] for r in ranks]
    assert option["aggregated_read_bandwidth_gbps"] == pytest.approx(
        sum(s["tier_storage_read_bandwidth_gbps"] for s in stats)
    )
    assert option["aggregated_device_read_p95_ms"] == max(s["storage_read_device_p95_ms"] for s in stats)
    assert option["aggregated_device_read_p95_ms"] > min(s["storage_read_device_p95_ms"] for s in stats)
    assert summary["options"] == written["options"] and not option["partial_failure"]


def test_a_rank_without_its_result_is_a_partial_failure(tmp_path):
    run = shutil.copytree(FIXTURES / "iolab", tmp_path / "run")
    shutil.rmtree(run / "rank_1")
    option = kvcache.summarize(run, 2, "iolab", 0)["options"]["0"]
    assert option["partial_failure"] and option["missing_files"] == ["rank_1"] and option["rank_count"] == 2
    assert parser.parse(run).measurements[-1].value == 1.0  # kv_errors


@pytest.mark.parametrize("engine", ["iolab", "mlperf"])
def test_the_parser_reads_both_engines_into_the_same_metrics(engine):
    parsed = parser.parse(FIXTURES / engine)
    figures = {(m.metric, m.params.get("rank"), m.params.get("tier")): m for m in parsed.measurements}
    option = json.loads((FIXTURES / engine / parser.SUMMARY).read_text())["options"]["0"]
    assert figures[("read_bw", None, None)].value == pytest.approx(option["aggregated_read_bandwidth_gbps"] * 2**30)
    assert figures[("kv_read_p95_max", None, None)].value == pytest.approx(
        option["aggregated_device_read_p95_ms"] / 1e3
    )
    assert {figures[("kv_read_p95", r, None)].unit for r in (0, 1)} == {"s"}
    assert (
        max(figures[("kv_read_p95", r, None)].value for r in (0, 1)) == figures[("kv_read_p95_max", None, None)].value
    )
    assert figures[("kv_storage_read_bytes", None, None)].value > 0 and figures[("kv_errors", None, None)].value == 0
    assert figures[("kv_cpu_read_bytes", None, None)].value == 0  # no CPU tier
    assert parsed.metadata["kv_tool"] == ("kv-cache.py" if engine == "mlperf" else "iolab")
    assert ("kv_reference" in parsed.metadata) == (engine == "mlperf")


def test_one_search_decides_a_latency_bound_too():
    """The accelerator search's decision with `passes`: the most N whose every probe's P95 is at most the bound."""
    p95 = {1: 0.05, 2: 0.08, 3: 0.12, 4: 0.19, 5: 0.26, 6: 0.3}
    outcome = search(lambda n: p95[min(n, 6)], ceiling=8, passes=lambda value: value <= 0.2)
    assert (outcome.held, outcome.failed, outcome.bound) == (4, 5, None)
    assert sum(1 for n, _ in outcome.history if n == 4) == 3 and sum(1 for n, _ in outcome.history if n == 5) == 3


def test_the_reference_is_refused_in_one_line_where_it_is_missing(tmp_path, capsys):
    if mlperf_kvcache.installed() is not None:
        pytest.skip("MLCommons' kv-cache.py is installed in this environment")
    refused = mlperf_kvcache.refusal(tmp_path, 1, {"users": 1})
    assert refused and "\n" not in refused and "kvcache_source" in refused
    # The run's prepare (iolab.kinds.kvcache.workload.reference_call) says it so, and makes no run directory.
    run = tmp_path / "run"
    argv = ["prepare", "--host", "gpu01", "--run-dir", str(run), "--dir", str(tmp_path / "w"), "--options", "{}"]
    assert mlperf_kvcache.main([*argv, "--key", str(tmp_path / "key")]) == 1 and not run.exists()
    assert capsys.readouterr().err.strip() == refused
