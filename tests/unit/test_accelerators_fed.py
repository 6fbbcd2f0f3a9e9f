"""A campaign's `search: accelerators`: the search's decision rule, the accelerators_fed samples and the verdict.

The probes' samples here are written by hand in the shape the pytorch parser
stores (au per host with the slowest rank's steps, read_bw and samples_per_s per
host and for all hosts: tests/report_stores.probe_samples); the search on real hosts is
tests/integration/test_accelerators_campaign.py.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from report_stores import probe_samples  # a probe's samples in the pytorch parser's shape
from rich.console import Console

from iolab.campaign import model as campaign
from iolab.drive.execute import Lab
from iolab.errors import RunFailed, UserError
from iolab.kinds.pytorch import workload as pytorch_workload
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample
from iolab.report import compare, compare_export
from iolab.report import html as report_html
from iolab.report import tables as report
from iolab.run import accelerators, bench

HOSTS = ["gpu01", "gpu02"]
RAW = {
    "name": "verdict",
    "repetitions": 3,
    "backends": [
        {"name": "fast", "type": "tmpfs", "size": "1GiB"},
        {"name": "slow", "type": "local", "path": "/var/tmp"},
    ],
    "dataset": {"kind": "imagenet-like", "files": 1536, "seed": 1},
    "workloads": [
        {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "2s"},
        {
            "name": "resnet50-h100",
            "type": "pytorch",
            "reader": "packed",
            "batch_size": 32,
            "accelerator": {"type": "h100"},
            "accelerators": 8,
            "search": "accelerators",
        },
    ],
}
CLIENT = {"side": "client", "reason": "this host's CPU: 1.97 of 2 cores busy, run queue 5.1"}
STORAGE = {"side": "storage", "reason": "storage: device loop3 100 % busy, read await 38 ms"}


def spec(raw: dict = RAW) -> campaign.Campaign:
    return campaign.parse(raw, "test", Path.cwd())


def search_run(backend: str) -> campaign.Run:
    return next(r for r in campaign.expand(spec()) if r.backend.name == backend and r.workload.name == "resnet50-h100")


def probe_run(run: campaign.Run, n: int, repeat: int) -> campaign.Run:
    return campaign.repetition(spec(), run.backend, accelerators.probed(run.workload, n, 1), repeat)[0]


def searched(
    backend: str,
    au_of: Callable[[int, int], dict[str, float]],
    bw: float,
    limit: Callable[[int], dict[str, str] | None] = lambda n: None,
    **search: object,
) -> list[Sample]:
    """The samples a search stores: its probes' (AU au_of(N, repeat)) and its accelerators_fed ones."""
    run = search_run(backend)
    probes: list[accelerators.Probe] = []
    stored: list[Sample] = []

    def probe(n: int) -> float:
        repeat = 1 + sum(1 for p in probes if p.accelerators == n)
        made = probe_run(run, n, repeat)
        samples = probe_samples(made, au_of(n, repeat), bw * n)
        found = accelerators._probe(n, repeat, made.run_id, samples, HOSTS)
        probes.append(dataclasses.replace(found, limited_by=limit(n)))
        stored.extend(samples)
        return found.au

    outcome = accelerators.search(probe, **search)  # type: ignore[arg-type]
    return stored + accelerators.fed_samples(run, outcome, probes, HOSTS, stored, 0.0, 10.0)


def table(aus: dict[int, float]) -> Callable[[int], float]:
    """A deterministic probe: the AU of N is the table's for the largest key ≤ N."""
    return lambda n: aus[max(k for k in aus if k <= n)]


def fed_of(samples: list[Sample]) -> Sample:
    return next(s for s in samples if s.metric == "accelerators_fed" and s.host == AGGREGATE_HOST)


# --- the decision rule ------------------------------------------------------------------------------


def test_the_search_doubles_bisects_then_probes_each_boundary_point_three_times_interleaved():
    outcome = accelerators.search(table({1: 95, 7: 80}), ceiling=64)
    assert [n for n, _ in outcome.history] == [1, 2, 4, 8, 6, 7, 6, 7, 6, 7]
    assert (outcome.held, outcome.failed, outcome.bound) == (6, 7, None)
    # Even 1 fails: the interval is (0–1), 1 probed three times.
    none = accelerators.search(lambda n: 50.0, ceiling=8)
    assert (none.held, none.failed, [n for n, _ in none.history]) == (0, 1, [1, 1, 1])


def test_a_boundary_point_that_fails_one_repeat_fails_and_the_search_bisects_again():
    """Every probe must hold: 6 held once, then fell to 85 % on its repeat, so 6 fails and 5 is probed."""
    seen: dict[int, int] = {}

    def flaky(n: int) -> float:
        seen[n] = seen.get(n, 0) + 1
        if n == 6:
            return [95.0, 85.0, 95.0][seen[n] - 1]
        return 95.0 if n <= 6 else 80.0

    outcome = accelerators.search(flaky, ceiling=64)
    assert [n for n, _ in outcome.history] == [1, 2, 4, 8, 6, 7, 6, 5, 5, 6, 5]
    assert (outcome.held, outcome.failed) == (5, 6)


def test_no_silent_cap_the_ceiling_and_what_this_host_can_emulate_answer_at_least():
    ceiling = accelerators.search(lambda n: 99.0, ceiling=5)
    assert (ceiling.held, ceiling.failed, ceiling.bound) == (5, None, "ceiling")
    assert [n for n, _ in ceiling.history] == [1, 2, 4, 5, 5, 5]
    host = accelerators.search(lambda n: 99.0, ceiling=64, capacity=lambda: 3)
    assert (host.held, host.failed, host.bound) == (3, None, "host")
    assert [n for n, _ in host.history] == [1, 2, 3, 3, 3]


def test_the_answer_stores_its_interval_each_points_probes_and_au_spread_and_what_limited_it():
    aus = {(6, 1): 93.0, (6, 2): 91.0, (6, 3): 96.0}
    samples = searched(
        "fast",
        lambda n, k: dict.fromkeys(HOSTS, aus.get((n, k), 99.0 if n <= 6 else 70.0)),
        100e6,
        lambda n: STORAGE if n >= 7 else CLIENT,
        ceiling=8,
    )
    fed = fed_of(samples)
    assert fed.value == 6 and fed.unit == "count"
    meta = fed.metadata
    assert (meta["held"], meta["failed"], meta["bound"], meta["ceiling"]) == (6, 7, None, 8)
    six = next(p for p in meta["points"] if p["accelerators"] == 6)
    assert six["probes"] == 3 and six["au"] == [93.0, 91.0, 96.0] and six["au_spread"] == 5.0 and six["held"]
    assert next(p for p in meta["points"] if p["accelerators"] == 7)["probes"] == 3
    # The answer stands for the lowest-AU probe of 6, its third repeat a distinct run.
    assert meta["at"]["au"] == 91.0 and meta["at"]["repeat"] == 2
    runs = [p["run_id"] for p in meta["probes"] if p["accelerators"] == 6]
    assert len(set(runs)) == 3
    assert meta["limited_by"] == STORAGE and meta["flags"] == [] and meta["steps_per_rank"] == 500
    assert report.fed_label(fed.value, meta, "h100") == "6 h100 (6–7)"


def test_a_host_bound_answer_is_at_least_n_limited_by_the_client_and_flagged():
    samples = searched("fast", lambda n, k: dict.fromkeys(HOSTS, 99.0), 100e6, lambda n: CLIENT, capacity=lambda: 2)
    meta = fed_of(samples).metadata
    assert meta["bound"] == "host" and meta["limited_by"]["side"] == "client"
    assert (
        "this host's capacity: it emulates at most 2 rank(s) (this host's CPU: 1.97 of 2 cores"
        in meta["limited_by"]["reason"]
    )
    assert report.fed_label(2, meta, "h100") == "≥ 2 h100 (limited by this host) ⚑ measures this host, not the storage"
    ceiling = fed_of(searched("fast", lambda n, k: dict.fromkeys(HOSTS, 99.0), 100e6, ceiling=8)).metadata
    assert report.fed_label(8, ceiling, "h100").startswith("≥ 8 h100 (the workload's ceiling)")


def test_probe_epochs_give_each_rank_the_step_floor_and_refuse_less_than_two_batches_a_rank():
    workload = search_run("fast").workload
    # 1,536 files over 8 ranks: 192 each, 6 batches of 32, 5 measured per epoch (the first is not): 100 epochs.
    assert pytorch_workload.probe_epochs(workload, 1536, 8, 1, 500) == 100
    assert pytorch_workload.probe_epochs(workload, 1536, 1, 1, 500) == 11  # 48 steps, 47 measured
    with pytest.raises(UserError, match=r"dataset.files 1536 gives each of 32 rank\(s\) .* 48 files, under 2"):
        pytorch_workload.probe_epochs(workload, 1536, 32, 1, 500)


def test_a_campaign_whose_search_gives_a_rank_under_two_batches_is_refused_before_anything_runs(tmp_path):
    class NoAnsible(Lab):
        def play(self, *args, **kwargs):
            raise AssertionError("nothing may run: the search is refused first")

    raw = {**RAW, "dataset": {"kind": "imagenet-like", "files": 100, "seed": 1}}  # 8 ranks: 13 files each
    lab = NoAnsible(inventory=None, hosts=["h1"], console=Console(file=io.StringIO()))  # type: ignore[arg-type]
    store = ResultStore(tmp_path, "verdict")
    with pytest.raises(UserError, match=r"^dataset.files 100 gives each of 8 rank\(s\) .* under 2 batches of 32") as no:
        bench.run_campaign(spec(raw), lab, store)
    assert "\n" not in str(no.value) and not store.samples_path.exists()


def test_a_lower_step_floor_is_for_tests_only_and_flags_the_answer(monkeypatch):
    assert pytorch_workload.step_floor() == pytorch_workload.STEP_FLOOR == 500
    monkeypatch.setenv(pytorch_workload.FLOOR_ENV, "20")
    assert pytorch_workload.step_floor() == 20
    run = search_run("fast")
    made = probe_run(run, 1, 1)
    stored = probe_samples(made, dict.fromkeys(HOSTS, 99.0), 1e6, steps=20)
    probe = accelerators._probe(1, 1, made.run_id, stored, HOSTS)
    outcome = accelerators.search(lambda n: probe.au, ceiling=1)
    meta = fed_of(accelerators.fed_samples(run, outcome, [probe] * 3, HOSTS, stored, 0.0, 1.0, 20)).metadata
    assert meta["step_floor"] == 20 and "probes of 20 steps per rank, under MLPerf's 500" in meta["flags"]
    monkeypatch.setenv(pytorch_workload.FLOOR_ENV, "900")
    with pytest.raises(UserError, match="IOLAB_PROBE_STEPS='900'"):
        pytorch_workload.step_floor()


# --- probe_until: each repeat its own run, a resumed search reuses them ------------------------------


def telemetry(probe: campaign.Run, host: str, busy: float, tool: float) -> list[Sample]:
    """A host's telemetry summaries as iolab.parsers.telemetry stores them: 2 cores, `busy` of them busy, `tool`
    of them the emulator's."""
    base = probe_samples(probe, dict.fromkeys(HOSTS, 0.0), 0.0)[0]
    cpu = {"host": host, "metric": "cpu_cores", "unit": "cores"}
    host_params = {**probe.params, "scope": "host", "mode": "user"}
    kernel = {"telemetry": {"cpus": 2, "boot_id": host, "mem_total": 8 << 30}}
    return [
        dataclasses.replace(base, **cpu, value=busy, params=host_params, metadata=kernel),
        dataclasses.replace(base, **cpu, value=tool, params={**probe.params, "scope": "tool"}, metadata={}),
    ]


class Probing:
    """Stands in for a BackendSession (whose measure() plays a probe on real hosts: the integration test):
    measure() stores the samples of a probe at au_of(N, repeat) in a real result store, with the host telemetry
    cpu(N, repeat) gives: (busy cores, the emulator's cores) of 2."""

    def __init__(
        self,
        store: ResultStore,
        au_of: Callable[[int, int], float],
        steps: int = 500,
        cpu: Callable[[int, int], tuple[float, float]] | None = None,
    ):
        self.state = SimpleNamespace(store=store)
        self.au_of, self.steps, self.cpu, self.measured = au_of, steps, cpu, []

    def measure(self, run: campaign.Run, title: str, hosts: list[str]):
        n = run.workload.accelerators
        self.measured.append((n, run.repetition))
        samples = probe_samples(run, dict.fromkeys(hosts, self.au_of(n, run.repetition)), 1e6, self.steps)
        if self.cpu:
            samples += [t for h in hosts for t in telemetry(run, h, *self.cpu(n, run.repetition))]
        self.state.store.add_samples(samples)
        return [], samples, None


def test_each_probe_of_a_point_is_its_own_run_and_a_search_run_again_reuses_them(tmp_path):
    store = ResultStore(tmp_path, "verdict")
    run = search_run("fast")
    session = Probing(store, lambda n, k: 95.0 if n <= 2 else 60.0)
    outcome, probes = accelerators.probe_until(session, lambda n, k: probe_run(run, n, k), HOSTS, 8, show=str)
    assert (outcome.held, outcome.failed) == (2, 3)
    assert session.measured == [(1, 1), (2, 1), (4, 1), (3, 1), (2, 2), (3, 2), (2, 3), (3, 3)]
    assert len({p.run_id for p in probes}) == len(probes) == 8
    again = Probing(store, lambda n, k: 0.0)
    second, _ = accelerators.probe_until(again, lambda n, k: probe_run(run, n, k), HOSTS, 8, show=str)
    assert again.measured == [] and second == outcome


def test_after_its_first_probe_the_search_aims_where_the_backends_fio_read_baseline_puts_the_boundary(tmp_path):
    """The backend's fio seq read over both hosts read 3.5 times what the first probe read: the search probes 3
    next and then its neighbour, where without a baseline it doubles through 2 and 4; the same answer both ways."""
    run = search_run("fast")
    seq = next(r for r in campaign.expand(spec()) if r.backend.name == "fast" and r.workload.name == "seq")
    baseline = dataclasses.replace(
        probe_samples(seq, {}, 0.0)[0], value=7e6, metadata={"fio_options": {"rw": "read", "bs": "1m"}}
    )
    aimed, doubled = (ResultStore(tmp_path / name, "verdict") for name in ("aimed", "doubled"))
    aimed.add_samples([baseline])
    answers = []
    for store in (aimed, doubled):
        session = Probing(store, lambda n, k: 95.0 if n <= 3 else 60.0)  # each probe reads 2 MB/s over the hosts
        outcome, _ = accelerators.probe_until(session, lambda n, k: probe_run(run, n, k), HOSTS, 8, show=str)
        answers.append(((outcome.held, outcome.failed), [n for n, _ in session.measured]))
    assert answers == [((3, 4), [1, 3, 4, 3, 4, 3, 4]), ((3, 4), [1, 2, 4, 3, 4, 3, 4, 3])]


def test_a_probe_under_the_step_floor_is_no_answer(tmp_path):
    run = search_run("fast")
    session = Probing(ResultStore(tmp_path, "verdict"), lambda n, k: 99.0, steps=120)
    with pytest.raises(RunFailed, match="measured 120 steps per rank .* under the floor of 500"):
        accelerators.probe_until(session, lambda n, k: probe_run(run, n, k), HOSTS, 8, show=str)


def test_a_disturbed_probe_is_run_again_and_if_it_stays_disturbed_the_answer_says_so(tmp_path):
    """Foreign CPU (busy less the emulator's: iolab.measures.limits) of a core or more disturbs a probe of 2 cores."""
    run = search_run("fast")

    def cpu(n: int, k: int) -> tuple[float, float]:
        hog = 1.0 if (n, k) in {(1, 1), (2, 1), (2, 2), (2, 3)} else 0.0  # 2's first three runs: all disturbed
        return 0.2 * n + hog, 0.2 * n

    session = Probing(ResultStore(tmp_path, "verdict"), lambda n, k: 95.0 if n <= 2 else 60.0, cpu=cpu)
    lines: list[str] = []
    outcome, probes = accelerators.probe_until(session, lambda n, k: probe_run(run, n, k), HOSTS, 8, show=lines.append)
    assert session.measured[:5] == [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3)]  # 1 again once, 2 twice
    assert [p.counted for p in probes[:5]] == [False, True, False, False, True]
    assert "foreign load: 1.00 of 2 cores busy outside the emulator" in probes[0].disturbed
    assert "disturbed (foreign load" in lines[0] and (outcome.held, outcome.failed) == (2, 3)
    meta = accelerators.summary(outcome, probes, 90.0, 8, 500)
    assert meta["disturbed"].startswith("foreign load") and meta["flags"][0].startswith("disturbed: foreign load")
    assert next(p for p in meta["points"] if p["accelerators"] == 2)["disturbed"] == 2


def test_a_test_may_count_a_disturbed_probe_at_once_and_the_answer_still_says_so(tmp_path, monkeypatch):
    """The integration and lab tests (tests/support.py) run beside another pytest-xdist worker: IOLAB_DISTURBED_RETRIES
    0 counts each disturbed probe without running it again, flagged; anything above the product's 2 is refused."""
    run = search_run("fast")

    def hogged(n: int, k: int) -> tuple[float, float]:
        return 0.2 * n + 1.0, 0.2 * n  # a core of foreign load on every probe

    session = Probing(ResultStore(tmp_path, "verdict"), lambda n, k: 95.0 if n <= 2 else 60.0, cpu=hogged)
    monkeypatch.setenv(accelerators.RETRIES_ENV, "0")
    outcome, probes = accelerators.probe_until(session, lambda n, k: probe_run(run, n, k), HOSTS, 8, show=str)
    assert session.measured == [(1, 1), (2, 1), (4, 1), (3, 1), (2, 2), (3, 2), (2, 3), (3, 3)]  # as undisturbed
    assert all(p.counted and p.disturbed for p in probes) and (outcome.held, outcome.failed) == (2, 3)
    assert accelerators.summary(outcome, probes, 90.0, 8, 500)["flags"][0].startswith("disturbed: foreign load")
    monkeypatch.setenv(accelerators.RETRIES_ENV, "3")
    with pytest.raises(UserError, match="IOLAB_DISTURBED_RETRIES='3': a test's runs again of a disturbed probe are 0"):
        accelerators.probe_until(session, lambda n, k: probe_run(run, n, k), HOSTS, 8, show=str)


def test_the_search_stops_where_this_host_can_emulate_no_more_and_says_so(tmp_path):
    """The emulator costs 0.45 of a core per rank on 2 cores: this host emulates 4 (iolab.measures.limits.capacity)."""
    run = search_run("fast")
    session = Probing(ResultStore(tmp_path, "verdict"), lambda n, k: 99.0, cpu=lambda n, k: (0.45 * n, 0.45 * n))
    outcome, probes = accelerators.probe_until(session, lambda n, k: probe_run(run, n, k), HOSTS, 16, show=str)
    assert (outcome.held, outcome.failed, outcome.bound) == (4, None, "host")
    assert [p.accelerators for p in probes] == [1, 2, 4, 4, 4] and probes[-1].capacity == 4
    meta = accelerators.summary(outcome, probes, 90.0, 16, 500)
    assert meta["limited_by"]["side"] == "client"
    assert report.fed_label(4, meta, "h100").startswith("≥ 4 h100 (limited by this host)")


# --- the report, the page and report.compare -----------------------------------------------------------


def test_a_search_workload_runs_once_per_backend_whatever_the_repetitions():
    runs = campaign.expand(spec())
    assert [r.backend.name for r in runs if r.workload.name == "resnet50-h100"] == ["fast", "slow"]
    assert len([r for r in runs if r.workload.name == "seq"]) == 2 * 3


def test_a_search_needs_an_accelerator():
    raw = {**RAW, "workloads": [{"name": "x", "type": "pytorch", "search": "accelerators"}]}
    with pytest.raises(UserError, match="add accelerator: {type: h100}"):
        spec(raw)


def test_the_verdict_row_has_the_interval_the_au_over_the_probes_and_the_limit():
    samples = searched(
        "fast", lambda n, k: dict.fromkeys(HOSTS, 95.0 - k if n <= 2 else 80.0), 200e6, lambda n: STORAGE, ceiling=8
    ) + searched("slow", lambda n, k: {"gpu01": 40.0, "gpu02": 50.0}, 10e6, lambda n: CLIENT, ceiling=8)
    rows = {r["backend"]: r for r in report.verdict_rows(samples)}
    assert rows["fast"]["fed"] == 2 and rows["fast"]["au"] == 92.0 and rows["fast"]["limited_by"] == STORAGE
    assert rows["fast"]["read_bw"] == 2 * 200e6 * len(HOSTS)
    assert rows["slow"]["fed"] == 0 and rows["slow"]["au"] == 40 and rows["slow"]["at"] == 1
    head, cells = report.verdict_cells(list(rows.values()), "si")
    assert head[2] == "accelerators fed (held–failed)" and head[3] == "read_bw (MB/s)"
    assert head[5] == "AU over the (n) probes (%)"
    assert cells[0] == ["resnet50-h100", "fast", "2 h100 (2–3)", "800", "92.0", "92.0–94.0 (3)"]
    assert cells[1][2] == "0 h100 (0–1)" and cells[1][3] == "20"  # its flag is a footnote's: rows' "flags"
    assert rows["slow"]["flags"] == [("host-bound", "measures this host, not the storage")]
    assert rows["fast"]["flags"] == []
    assert report.limit_line(rows["slow"]) == (
        "slow (resnet50-h100): limited by this host's CPU: 1.97 of 2 cores busy, run queue 5.1 "
        "— measures this host, not the storage"
    )


def test_the_report_and_the_page_open_with_what_limited_each_backend_then_the_interval(tmp_path):
    store = ResultStore(tmp_path, "verdict")
    store.add_samples(
        searched("fast", lambda n, k: dict.fromkeys(HOSTS, 99.0 if n == 1 else 80.0), 50e6, lambda n: CLIENT)
    )
    console = Console(record=True, width=250)
    report.print_report(store, console)
    lines = console.export_text().splitlines()
    assert lines[0].startswith("campaign verdict: how many emulated accelerators per host each backend keeps at AU")
    assert "AU ≥ 90%" in lines[0]
    assert lines[1].startswith("fast (resnet50-h100): limited by this host's CPU")
    text = "\n".join(lines)
    assert "1 h100 (1–2)" in text and "lab-scale" in text and "MLPerf Storage rules broken" in text
    assert text.index("how many emulated accelerators") < text.index("median ± half-range")
    page = report_html.build(store)
    assert page.index('id="verdict"') < page.index('id="summary"') < page.index('id="throughput"')
    verdict = page[page.index('id="verdict"') : page.index('id="summary"')]
    assert verdict.index("limited by this host") < verdict.index("<b>1 h100 (1–2)")
    assert "this measures the host, not the storage" in verdict and "5× each host" in page


def test_the_pages_au_chart_is_one_curve_per_search_and_its_most_is_what_held_every_repeat(tmp_path):
    """A search's probes run as many epochs as each N needs: one curve still; 3 held by its median (95 %) but
    not in every repeat (85 % once), so the most that held is 2, as the verdict says."""
    store = ResultStore(tmp_path, "verdict")
    aus = {1: [95.0] * 3, 2: [95.0] * 3, 3: [95.0, 85.0, 95.0]}
    store.add_samples(searched("fast", lambda n, k: dict.fromkeys(HOSTS, aus[n][k - 1] if n in aus else 80.0), 1e8))
    page = report_html.build(store)
    section = page[page.index('id="au"') :]
    assert section.count("accelerator utilization (AU) against emulated accelerators") == 1
    assert "<td class=num>2</td><td>90%</td>" in section
    assert "<b>2 h100 (2–3)</b>" in page


def test_report_compare_shows_each_sides_answer_with_its_interval(tmp_path):
    store = ResultStore(tmp_path, "verdict")
    store.add_samples(searched("fast", lambda n, k: dict.fromkeys(HOSTS, 95.0 if n <= 6 else 80.0), 1e8, ceiling=8))
    store.add_samples(
        searched("slow", lambda n, k: dict.fromkeys(HOSTS, 95.0), 1e7, lambda n: CLIENT, capacity=lambda: 2)
    )
    samples = store.samples()
    result = compare.compare(
        compare.Side("fast", samples, "fast", store), compare.Side("slow", samples, "slow", store), []
    )
    point = next(p for p in result.points if p.metric == "accelerators_fed")
    assert point.answers == (
        ["6 h100 (6–7)"],
        ["≥ 2 h100 (limited by this host) ⚑ measures this host, not the storage"],
    )
    console = Console(record=True, width=300)
    console.print(compare.table(result))
    row = next(line for line in console.export_text().splitlines() if "accelerators_fed" in line)
    assert "6 h100 (6–7)" in row and "≥ 2 h100 (limited by this host)" in row
    shown = next(p for p in compare_export.to_dict(result)["points"] if p["metric"] == "accelerators_fed")
    assert shown["answers"]["baseline"] == ["6 h100 (6–7)"]


def test_a_campaign_without_a_search_has_no_verdict(tmp_path):
    assert report.verdict_rows([]) == [] and report.verdict_table(ResultStore(tmp_path, "none"), []) is None


@pytest.mark.parametrize(
    ("model", "accelerator", "expected"),
    [("retinanet", "b200", 85.0), ("unet3d", "b200", 90.0), ("resnet50", "h100", 90.0)],
)
def test_a_search_holds_its_models_mlperf_threshold(model, accelerator, expected):
    """retinanet's AU threshold is 85 % in MLPerf Storage v3.0: its search must not ask for 90 %, and its
    accelerators_fed sample says which threshold it held."""
    workload = {**RAW["workloads"][1], "accelerator": {"type": accelerator, "model": model}}
    run = next(r for r in campaign.expand(spec({**RAW, "workloads": [workload]})))
    assert accelerators.threshold_of(run.workload) == expected
    made = probe_run(run, 1, 1)
    stored = probe_samples(made, {"gpu01": 87.0, "gpu02": 86.0}, 1e6)
    probe = accelerators._probe(1, 1, made.run_id, stored, HOSTS)
    outcome = accelerators.search(lambda n: probe.au, threshold=expected, ceiling=1)
    fed = accelerators.fed_samples(run, outcome, [probe] * 3, HOSTS, stored, 0.0, 10.0)
    assert {s.params["au_threshold"] for s in fed} == {expected}
