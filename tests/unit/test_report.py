"""The report on real campaigns (tests/fixtures/report/README.md): summaries, winners, flags, compare, history.

Expected figures are computed here from the fixtures' JSON lines, independently
of the code under test, so a test fails if the report groups, picks or flags the
wrong thing.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import hashlib
import io
import json
import re
import shutil
import statistics
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from iolab.campaign.model import expand, load
from iolab.errors import UserError
from iolab.measures import host_flags, validity, welch, who_wins
from iolab.measures.samples import ResultStore, Sample
from iolab.report import compare, history
from iolab.report import tables as report
from support import Cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report"
CAMPAIGN = "report-fixture"  # tmpfs vs local, seq-read + rand-read iodepth 1/16, 2 repetitions
SINGLE = "fio-tmpfs"  # one backend, 3 repetitions, telemetry on the third run


def lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name / "samples.jsonl").read_text().splitlines()]


def samples(name: str) -> list[Sample]:
    return [Sample.from_dict(d) for d in lines(name)]


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A results/ with both fixture campaigns in it."""
    root = tmp_path / "results"
    shutil.copytree(FIXTURES, root, ignore=shutil.ignore_patterns("*.md", "*.yml"))
    return root


def aggregate_values(name: str) -> dict[tuple, list[float]]:
    """(workload, iodepth, metric, backend) → the repeats, read as the report must: host "*" where a run has it."""
    data = lines(name)
    has_aggregate = {(d["run_id"], d["metric"]) for d in data if d["host"] == "*"}
    out: dict[tuple, list[float]] = defaultdict(list)
    for d in data:
        if d["host"] != "*" and (d["run_id"], d["metric"]) in has_aggregate:
            continue
        if set(d["params"]) - {"numjobs", "profile", "ramp", "runtime", "size", "iodepth"}:
            continue  # a telemetry qualifier (mode, device, interface)
        out[(d["workload"], d["params"].get("iodepth"), d["metric"], d["backend"])].append(d["value"])
    return out


# --- summaries ------------------------------------------------------------------------------------


def test_summary_has_one_row_per_point_and_backend_with_the_median_of_the_repeats():
    expected = aggregate_values(CAMPAIGN)
    rows = who_wins.summarize(samples(CAMPAIGN))
    assert len(rows) == len(expected) == 3 * 7 * 2  # 3 points × 7 fio metrics × 2 backends
    for row in rows:
        iodepth = json.loads(row["setting"]).get("iodepth")
        values = expected[(row["workload"], iodepth, row["metric"], row["backend"])]
        assert row["n"] == len(values) == 2
        assert row["median"] == pytest.approx(statistics.median(values))
        assert (row["min"], row["max"]) == (min(values), max(values))
        assert row["spread"] == pytest.approx((max(values) - min(values)) / 2 / statistics.median(values))


def test_settings_are_labelled_by_what_varies_within_a_workload():
    labels = {(r["workload"], r["setting_label"]) for r in who_wins.summarize(samples(CAMPAIGN))}
    assert labels == {("seq-read", ""), ("rand-read", "iodepth=1"), ("rand-read", "iodepth=16")}


def test_telemetry_qualifiers_label_the_metric_not_the_setting():
    """The third run of fio-tmpfs has cpu_cores per mode, dev_* per device: its read_bw is still a repeat."""
    rows = who_wins.summarize(samples(SINGLE))
    assert {r["setting"] for r in rows} == {rows[0]["setting"]}
    by_metric = {r["metric"]: r for r in rows}
    assert by_metric["read_bw"]["n"] == 3
    assert {"cpu_cores{mode=user,scope=host}", "cpu_cores{scope=tool}"} <= set(by_metric)
    assert by_metric["cpu_cores{scope=tool}"]["n"] == 1


# --- winners --------------------------------------------------------------------------------------


def test_tmpfs_wins_every_point_by_the_ratio_of_the_medians():
    expected = aggregate_values(CAMPAIGN)
    found = who_wins.winners(who_wins.summarize(samples(CAMPAIGN)))
    assert {(w["workload"], w["setting_label"], w["metric"]) for w in found} == {
        (w, s, m)
        for w, s in [("seq-read", ""), ("rand-read", "iodepth=1"), ("rand-read", "iodepth=16")]
        for m in ("read_bw", "read_iops", "read_clat_p99")
    }
    for w in found:
        iodepth = {"": None, "iodepth=1": 1, "iodepth=16": 16}[w["setting_label"]]
        tmpfs = statistics.median(expected[(w["workload"], iodepth, w["metric"], "tmpfs")])
        local = statistics.median(expected[(w["workload"], iodepth, w["metric"], "local")])
        assert (w["winner"], w["runner_up"]) == ("tmpfs", "local")
        ratio = local / tmpfs if w["metric"] == "read_clat_p99" else tmpfs / local
        assert w["ratio"] == pytest.approx(ratio) and ratio > 1
        assert w["lower_is_better"] == (w["metric"] == "read_clat_p99")


def test_winner_is_sure_only_when_the_repeats_are_apart():
    base = who_wins.summarize(samples(CAMPAIGN))
    read_bw = [r for r in base if r["workload"] == "seq-read" and r["metric"] == "read_bw"]
    tmpfs, local = sorted(read_bw, key=lambda r: r["backend"] != "tmpfs")
    assert tmpfs["min"] > local["max"]
    assert who_wins.winners(read_bw)[0]["sure"] == "yes"
    overlapping = [tmpfs, {**local, "max": tmpfs["min"] * 1.01}]
    assert who_wins.winners(overlapping)[0]["sure"] == "overlap"
    single = [tmpfs, {**local, "n": 1}]
    assert who_wins.winners(single) == []  # a single repeat has no range: nothing to compare


def test_margin_reads_as_times_or_percent():
    assert who_wins.margin(5.8, False) == "5.8×"
    assert who_wins.margin(1.23, False) == "+23%"
    assert who_wins.margin(1.25, True) == "20% lower"
    assert who_wins.margin(1808.4, True) == "1,808× lower"


def test_terminal_report_starts_with_the_winners_then_the_figures_then_the_flags(results):
    console = Console(record=True, width=220)
    report.print_report(ResultStore(results, CAMPAIGN), console)
    text = console.export_text()
    winners_at, figures_at, flags_at = (
        text.index("who wins"),
        text.index("median ± half-range"),
        text.index("flags: runs"),
    )
    assert winners_at < figures_at < flags_at
    seq_bw = next(
        w
        for w in who_wins.winners(who_wins.summarize(samples(CAMPAIGN)))
        if w["workload"] == "seq-read" and w["metric"] == "read_bw"
    )
    assert seq_bw["margin"] == "5.8×" and seq_bw["margin"] in text[winners_at:figures_at]


def test_one_backend_has_no_winners_but_its_figures(results):
    console = Console(record=True, width=220)
    report.print_report(ResultStore(results, SINGLE), console)
    text = console.export_text()
    assert "nothing to compare" in text and "read_bw" in text and "(3)" in text


# --- flags ----------------------------------------------------------------------------------------


def host_sample(name: str = CAMPAIGN, metric: str = "read_bw", backend: str = "local") -> Sample:
    return next(s for s in samples(name) if s.metric == metric and s.host != "*" and s.backend == backend)


def buffered(sample: Sample, **metadata) -> Sample:
    """A fixture sample as if fio had run without direct=1 (the page cache in the way)."""
    meta = copy.deepcopy(sample.metadata)
    meta["fio_options"]["direct"] = "0"
    meta.update(metadata)
    return dataclasses.replace(sample, metadata=meta)


def test_fixture_runs_use_direct_io_and_are_not_judged_on_size_and_say_why():
    for s in samples(CAMPAIGN):
        if s.host != "*":
            assert s.metadata["fio_options"]["direct"] == "1"
            flags, reasons = host_flags.sample_flags(s)
            assert flags == []
            assert any("direct=1" in r and "bypasses the page cache" in r for r in reasons)


def test_data_set_smaller_than_ram_without_direct_io_is_flagged():
    """Built from a real fixture sample (64 MiB file, 23.5 GiB host) by setting direct=0 in its fio options."""
    original = host_sample()
    memory = original.metadata["host"]["memory_bytes"]
    size = int(original.metadata["fio_options"]["size"])
    assert size < 5 * memory
    flags, reasons = host_flags.sample_flags(buffered(original))
    assert flags == ["potential_caching"]
    assert "5×" in reasons[0] and "23.5 GiB of RAM" in reasons[0] and "localhost" in reasons[0]


def test_rereading_a_small_file_is_flagged_even_when_the_bytes_read_exceed_five_times_ram():
    """What counts is the distinct data: 4.7 GB read over and over from a 64 MiB file."""
    original = host_sample(backend="tmpfs")
    read = original.metadata["fio_read_bytes"]
    small_host = {**original.metadata["host"], "memory_bytes": read // 10}  # bytes read = 10× RAM
    flags, reasons = host_flags.sample_flags(buffered(original, host=small_host))
    assert flags == ["potential_caching"]
    assert "64 MiB data set" in reasons[0]


def test_data_set_of_five_times_ram_is_not_flagged():
    original = host_sample()
    size = int(original.metadata["fio_options"]["size"])
    host = {**original.metadata["host"], "memory_bytes": size // 5}
    meta_read = max(original.metadata["fio_read_bytes"], size)
    assert host_flags.sample_flags(buffered(original, host=host, fio_read_bytes=meta_read))[0] == []


def test_allow_caching_records_overridden_and_keeps_the_sample_valid():
    original = buffered(host_sample())
    allowed = dataclasses.replace(original, params={**original.params, "allow_caching": True})
    flags, reasons = host_flags.sample_flags(allowed)
    assert flags == ["overridden"]
    assert "allow_caching" in reasons[0] and "potential_caching" in reasons[0]
    row = validity.annotate([allowed])[0]
    assert row["valid"] is True and row["flags"] == ["overridden"]


def test_evidence_recorded_with_the_run_flags_it_even_with_direct_io():
    """The telemetry check (page cache growth, silent devices) is stored in metadata.flags."""
    original = host_sample()
    meta = {
        **original.metadata,
        "flags": ["potential_caching"],
        "flag_reasons": ["page cache grew by 64 MiB during the run, at least the 60 MiB the tool read"],
    }
    flags, reasons = host_flags.sample_flags(dataclasses.replace(original, metadata=meta))
    assert flags == ["potential_caching"] and "page cache grew" in reasons[0]


def test_flags_that_bench_records_with_a_run_are_not_counted_twice():
    """bench will store sample_flags' output in metadata.flags / flag_reasons; reading it back adds nothing."""
    original = buffered(host_sample())
    flags, reasons = host_flags.sample_flags(original)
    stored = dataclasses.replace(original, metadata={**original.metadata, "flags": flags, "flag_reasons": reasons})
    assert host_flags.sample_flags(stored) == (flags, reasons)
    direct = host_sample()
    names, notes = host_flags.sample_flags(direct)
    stored = dataclasses.replace(direct, metadata={**direct.metadata, "flags": names, "flag_reasons": notes})
    assert host_flags.sample_flags(stored) == ([], notes)


def test_loader_bytes_read_is_judged_against_ram():
    original = host_sample()
    meta = {"host": original.metadata["host"], "bytes_read": 10 << 30}
    loader = dataclasses.replace(original, metric="samples_per_s", unit="samples/s", metadata=meta)
    assert host_flags.sample_flags(loader)[0] == ["potential_caching"]
    meta = {**meta, "bytes_read": 6 * original.metadata["host"]["memory_bytes"]}
    assert host_flags.sample_flags(dataclasses.replace(loader, metadata=meta))[0] == []


def test_pytorch_loader_data_set_is_judged_from_its_size_and_window():
    """The shape of kinds/pytorch/parser.py metadata: dataset_bytes, and per-rank measured windows."""
    original = host_sample()
    memory = original.metadata["host"]["memory_bytes"]
    meta = {"host": original.metadata["host"], "dataset_bytes": 2 * memory, "ranks": [{"window_s": 10.0}]}
    bw = dataclasses.replace(original, metadata=meta)
    flags = validity.flags_for([bw])[bw.run_id]
    assert [f.name for f in flags] == ["potential_caching"] and "the loader's window" in flags[0].reason
    big = dataclasses.replace(bw, metadata={**meta, "dataset_bytes": 6 * memory})
    assert validity.flags_for([dataclasses.replace(big, value=memory)])[bw.run_id] == []


def test_samples_without_fio_byte_counts_use_read_bw_times_runtime():
    """Samples stored before the parser recorded fio_read_bytes are judged from the run's read_bw."""
    run = [s for s in samples(CAMPAIGN) if s.run_id == host_sample().run_id and s.host != "*"]
    old = []
    for s in run:
        meta = {k: v for k, v in s.metadata.items() if k not in ("fio_read_bytes", "fio_write_bytes")}
        old.append(buffered(dataclasses.replace(s, metadata=meta)))
    flags = validity.flags_for(old)[run[0].run_id]
    assert [f.name for f in flags] == ["potential_caching"]
    assert "read_bw × fio's runtime" in flags[0].reason


def test_repeats_that_differ_by_more_than_five_percent_flag_their_runs():
    expected = aggregate_values(CAMPAIGN)
    flags = validity.flags_for(samples(CAMPAIGN))
    run_ids = defaultdict(set)
    for d in lines(CAMPAIGN):
        run_ids[(d["workload"], d["params"].get("iodepth"), d["backend"])].add(d["run_id"])
    for (workload, iodepth, metric, backend), values in expected.items():
        if metric != "read_bw":
            continue
        spread = (max(values) - min(values)) / 2 / statistics.median(values)
        for run_id in run_ids[(workload, iodepth, backend)]:
            flagged = [f for f in flags[run_id] if f.name == "repeats_disagree" and f.metric == "read_bw"]
            assert bool(flagged) == (spread > 0.05), (workload, iodepth, backend, spread)
    seq_local = [f for r in run_ids[("seq-read", None, "local")] for f in flags[r] if f.metric == "read_bw"]
    assert seq_local and "±17.7%" in seq_local[0].reason


def test_latency_spread_is_shown_but_does_not_flag_a_run():
    flags = validity.flags_for(samples(CAMPAIGN))
    assert not [f for fs in flags.values() for f in fs if f.metric and "clat" in f.metric]
    rows = who_wins.summarize(samples(CAMPAIGN))
    assert any(not r["agree"] for r in rows if r["metric"] == "read_clat_p999")


# --- exports --------------------------------------------------------------------------------------


def test_json_export_carries_every_sample_with_its_flags(results):
    rows = json.loads(report.export(ResultStore(results, CAMPAIGN), "json"))
    assert len(rows) == len(lines(CAMPAIGN))
    assert all({"valid", "flags", "reasons"} <= set(r) for r in rows)
    flagged = [r for r in rows if "repeats_disagree" in r["flags"]]
    assert flagged and all(r["valid"] is False for r in flagged)
    assert {r["metric"] for r in flagged} <= validity.MERIT_METRICS


def test_csv_export_has_a_line_per_sample_and_flag_columns(results):
    text = report.export(ResultStore(results, CAMPAIGN), "csv")
    table = list(csv.DictReader(io.StringIO(text)))
    assert len(table) == len(lines(CAMPAIGN)) and text.count("\n") == len(table) + 1
    local_bw = [
        r for r in table if r["backend"] == "local" and r["workload"] == "seq-read" and r["metric"] == "read_bw"
    ]
    assert local_bw and all(json.loads(r["flags"]) == ["repeats_disagree"] and r["valid"] == "false" for r in local_bw)


@pytest.mark.parametrize("units, divisor, label", [("iec", 2**30, "GiB/s"), ("si", 1e9, "GB/s")])
def test_units_name_the_row_unit_and_scale_its_cells(results, units, divisor, label):
    expected = aggregate_values(CAMPAIGN)
    console = Console(record=True, width=220)
    report.print_report(ResultStore(results, CAMPAIGN), console, units=units)
    text = console.export_text()
    assert f"{units.upper()} units" in text
    figures = text.splitlines()[text.splitlines().index(next(x for x in text.splitlines() if "median ±" in x)) :]
    under = figures[figures.index(next(x for x in figures if x.strip() == "seq-read")) :]  # the point's line
    row = next(line for line in under if line.startswith("  read_bw") and "±" in line)
    assert f"read_bw ({label})" in row
    for backend in ("tmpfs", "local"):
        assert f"{statistics.median(expected[('seq-read', None, 'read_bw', backend)]) / divisor:.3g} ±" in row
    assert "iB/s" not in row.replace(label, "") and "GB/s" not in row.replace(label, "")


def test_html_report_in_si_units_labels_rows_and_axes_in_decimal_units(results):
    from iolab.report import html as report_html

    expected = aggregate_values(CAMPAIGN)
    store = ResultStore(results, CAMPAIGN)
    si, iec = report_html.build(store, "si"), report_html.build(store)
    assert "read_bw (GB/s)" in si and "GiB/s" not in si
    assert "read_bw (GiB/s)" in iec and "GB/s" not in iec
    throughput = si[
        si.index('<section id="throughput">') : si.index("</section>", si.index('<section id="throughput">'))
    ]
    assert re.search(r'class="axis-title"[^>]*>GB/s<', throughput)
    tmpfs = statistics.median(expected[("seq-read", None, "read_bw", "tmpfs")])
    assert f"<b>{tmpfs / 1e9:.3g}</b>" in si and f"<b>{tmpfs / 2**30:.3g}</b>" in iec


def test_units_are_refused_for_the_exports_and_when_unknown(results):
    cli = Cli(results)
    for args, says in [
        (("--units", "si", "--format", "csv"), "csv keeps canonical units"),
        (("--units", "furlongs"), "use iec (GiB/s, the default) or si (GB/s)"),
    ]:
        done = cli("report", "--campaign", CAMPAIGN, *args, check=False)
        assert done.returncode != 0 and says in done.stderr and "Traceback" not in done.stderr


def test_csv_columns_are_the_ones_the_readme_lists():
    text = report.export(ResultStore(FIXTURES, CAMPAIGN), "csv")
    header = text.splitlines()[0].split(",")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    listed = readme[readme.index("CSV columns") :]
    listed = listed[: listed.index("\n## ")]
    names = [name for item in listed.split("\n- ")[1:] for name in re.findall(r"`(\w+)`", item.split(": ")[0])]
    assert (
        names
        == header
        == [
            "campaign",
            "run_id",
            "repetition",
            "host",
            "backend",
            "workload",
            "metric",
            "value",
            "unit",
            "started_at",
            "ended_at",
            "valid",
            "flags",
            "reasons",
            "params",
            "metadata",
        ]
    )


# --- compare --------------------------------------------------------------------------------------


@pytest.mark.parametrize("df, expected", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423)])
def test_t_quantile_matches_the_tables(df, expected):
    assert welch.t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_ratio_interval_contains_the_ratio_and_is_unknown_with_one_repeat():
    r = welch.ratio_ci([100, 104, 98], [90, 93, 88])
    assert r.low < r.ratio < r.high and r.ratio == pytest.approx(
        statistics.geometric_mean([90, 93, 88]) / statistics.geometric_mean([100, 104, 98])
    )
    one = welch.ratio_ci([100], [90, 91])
    assert one.low is None and one.interval() == "unknown (n=1)"


def planted(results: Path, factor: float = 0.9) -> None:
    """results/baseline = the fixture campaign; results/candidate = the same with every value × factor."""
    shutil.copytree(results / CAMPAIGN, results / "baseline")
    (results / "candidate").mkdir()
    scaled = [json.dumps({**d, "value": d["value"] * factor}) for d in lines(CAMPAIGN)]
    (results / "candidate" / "samples.jsonl").write_text("\n".join(scaled) + "\n")


def test_planted_ten_percent_drop_breaks_a_five_percent_rule(results):
    planted(results)
    base, cand = compare.sides(results, "baseline", "candidate")
    result = compare.compare(
        base, cand, [compare.parse_rule("read_bw >= -5%"), compare.parse_rule("read_clat_p99 <= +10%")]
    )
    assert all(p.ratio.ratio == pytest.approx(0.9) for p in result.points if p.ratio)
    assert all(min(p.a) <= 0 for p in result.points if not p.ratio)  # no ratio of a zero (cpu_usr)
    broken = result.violations()
    assert len(broken) == 6  # read_bw of 3 points × 2 backends; latency got better
    assert all("read_bw" in line and "-10.0%" in line and "'read_bw >= -5%'" in line for line in broken)
    relaxed = compare.compare(base, cand, [compare.parse_rule("read_bw >= -15%")])
    assert relaxed.violations() == []


def test_compare_exits_1_with_one_line_per_violation_and_0_without(results):
    planted(results)
    cli = Cli(results)
    bad = cli("report.compare", "baseline", "candidate", "--rule", "read_bw >= -5%", check=False)
    assert bad.returncode == 1, bad.stderr
    assert len([line for line in bad.stdout.splitlines() if line.startswith("REGRESSION")]) == 6
    assert "6 rule violation(s)" in bad.stderr
    good = cli(
        "report.compare",
        "baseline",
        "candidate",
        "--rule",
        "read_bw >= -15%",
        "--rule",
        "read_clat_p99 <= +10%",
        check=False,
    )
    assert good.returncode == 0, good.stderr
    assert "REGRESSION" not in good.stdout and "0.9" in good.stdout


def test_rules_from_a_yaml_file_and_two_backends_of_one_campaign(results, tmp_path):
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"rules": ["read_bw >= -5%", "read_clat_* <= +10%"]}))
    cli = Cli(results)
    worse = cli("report.compare", "tmpfs", "local", "--campaign", CAMPAIGN, "--rules", str(rules), check=False)
    assert worse.returncode == 1
    lines_ = [line for line in worse.stdout.splitlines() if line.startswith("REGRESSION")]
    assert len(lines_) == 3 * 4  # 3 points × (read_bw + 3 latency percentiles)
    better = cli("report.compare", "local", "tmpfs", "--campaign", CAMPAIGN, "--rules", str(rules), check=False)
    assert better.returncode == 0


JUNIT_XSD = Path(__file__).resolve().parents[1] / "fixtures" / "junit" / "junit.xsd"


def test_compare_as_junit_is_a_test_case_per_rule_and_point_valid_against_the_junit_schema(results):
    from xml.etree import ElementTree as ET

    import xmlschema

    planted(results)
    done = Cli(results)(
        "report.compare",
        "baseline",
        "candidate",
        "--rule",
        "read_bw >= -5%",
        "--rule",
        "read_clat_p99 <= +10%",
        "--rule",
        "cpu_usr <= +50%",
        "--format",
        "junit",
        check=False,
    )
    assert done.returncode == 1 and "6 rule violation(s)" in done.stderr  # the exit status is unchanged
    schema = xmlschema.XMLSchema(JUNIT_XSD)
    schema.validate(done.stdout)  # stdout holds the document alone
    suite = ET.fromstring(done.stdout).find("testsuite")
    cases = suite.findall("testcase")
    # 3 points x 2 backends, for each of the three rules; the one cpu_usr repeat of 0 leaves a point without a ratio
    assert len(cases) == 18 and suite.get("tests") == "18"
    failed = [c for c in cases if c.find("failure") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert (suite.get("failures"), suite.get("skipped")) == ("6", "1")
    assert len(failed) == 6 and all(
        c.get("name").startswith("read_bw on ")
        and c.get("name").endswith(": read_bw >= -5%")
        and c.find("failure").get("type") == "regression"
        and "-10.0%" in c.find("failure").get("message")
        for c in failed
    )
    assert len(skipped) == 1 and skipped[0].get("name").startswith("cpu_usr on ")
    assert {c.get("classname") for c in cases} == {"seq-read", "rand-read iodepth=1", "rand-read iodepth=16"}
    # The schema is strict enough to matter: a suite without its hostname is refused.
    broken = ET.fromstring(done.stdout)
    del broken.find("testsuite").attrib["hostname"]
    assert not schema.is_valid(ET.tostring(broken, encoding="unicode"))


def test_compare_as_json_has_the_documented_shape_and_the_same_exit_status(results):
    planted(results)
    cli = Cli(results)
    bad = cli("report.compare", "baseline", "candidate", "--rule", "read_bw >= -5%", "--format", "json", check=False)
    assert bad.returncode == 1
    doc = json.loads(bad.stdout)
    assert doc["schema"] == "iolab.compare/1" and (doc["baseline"], doc["candidate"]) == ("baseline", "candidate")
    assert doc["rules"] == ["read_bw >= -5%"] and doc["regressions"] == 6
    assert set(doc["points"][0]) == {
        "workload",
        "setting",
        "setting_label",
        "metric",
        "backend",
        "unit",
        "baseline",
        "candidate",
        "ratio",
        "change",
        "low",
        "high",
        "lost",
        "answers",
        "checks",
    }
    assert all(p["answers"] is None for p in doc["points"])  # a search's answers only
    read_bw = [p for p in doc["points"] if p["metric"] == "read_bw"]
    assert len(read_bw) == 6 and all(p["checks"][0]["outcome"] == "failed" for p in read_bw)
    assert all(
        p["ratio"] == pytest.approx(0.9) and p["candidate"]["median"] == pytest.approx(0.9 * p["baseline"]["median"])
        for p in read_bw
    )
    assert all(p["checks"] == [] for p in doc["points"] if p["metric"] != "read_bw")
    good = cli("report.compare", "baseline", "candidate", "--rule", "read_bw >= -15%", "--format", "json", check=False)
    assert good.returncode == 0 and json.loads(good.stdout)["regressions"] == 0
    wrong = cli("report.compare", "baseline", "candidate", "--format", "xml", check=False)
    assert wrong.returncode != 0 and "use table, junit or json" in wrong.stderr and "Traceback" not in wrong.stderr


@pytest.mark.parametrize("text", ["read_bw >= 5", "read_bw => -5%", ">= -5%", "read_bw >= five%"])
def test_unreadable_rules_are_refused_with_an_example(text):
    with pytest.raises(UserError, match="read_bw >= -5%"):
        compare.parse_rule(text)


def test_a_rule_that_matches_nothing_is_an_error_not_a_pass(results):
    base, cand = compare.sides(results, "local", "tmpfs", CAMPAIGN)
    with pytest.raises(UserError, match="matches no metric"):
        compare.compare(base, cand, [compare.parse_rule("samples_per_s >= -5%")])


# --- history --------------------------------------------------------------------------------------


def test_history_lists_moved_aside_stores_and_matches_their_configuration(results):
    moved = f"{CAMPAIGN}.20261121T070000Z"  # what bench.all --no-resume leaves
    shutil.copytree(results / CAMPAIGN, results / moved)
    entries = {e.store: e for e in history.campaigns(results)}
    assert set(entries) == {CAMPAIGN, moved, SINGLE}
    run_ids = sorted({d["run_id"] for d in lines(CAMPAIGN)})
    assert entries[CAMPAIGN].config_hash == hashlib.sha256("\n".join(run_ids).encode()).hexdigest()[:12]
    assert entries[moved].config_hash == entries[CAMPAIGN].config_hash != entries[SINGLE].config_hash
    assert entries[moved].campaign == CAMPAIGN
    assert (entries[CAMPAIGN].runs, entries[CAMPAIGN].samples) == (12, len(lines(CAMPAIGN)))
    assert entries[CAMPAIGN].hosts == ("localhost",) and entries[CAMPAIGN].date.startswith("2026-11-21")
    assert history.same_configuration(list(entries.values())) == {entries[CAMPAIGN].config_hash: [CAMPAIGN, moved]}
    text = Cli(results)("report.history").stdout
    assert moved in text and entries[CAMPAIGN].config_hash in text


def test_the_campaign_file_reproduces_the_stored_runs():
    """Re-running the fixture's campaign file gives the same run ids, hence the same configuration hash."""
    spec = load(FIXTURES / "campaign.yml")
    stored = ResultStore(FIXTURES, CAMPAIGN)
    assert history.config_hash([r.run_id for r in expand(spec)]) == history.entry(stored).config_hash


# --- the HTML page's sections (rendering itself: tests/integration/test_report_html.py) -------------


def write_store(root: Path, name: str, data: list[Sample]) -> ResultStore:
    store = ResultStore(root, name)
    store.add_samples(data)
    return store


def test_accelerator_utilization_curve_and_how_many_accelerators_each_backend_feeds(tmp_path):
    """No AU workload exists yet: AU samples are made from real read_bw samples (metric, value and
    params.accelerators replaced), tmpfs holding 90% up to 4 accelerators, local only up to 1."""
    from iolab.report import html as report_html

    base = {
        b: next(s for s in samples(CAMPAIGN) if s.host == "*" and s.metric == "read_bw" and s.backend == b)
        for b in ("tmpfs", "local")
    }
    au = {"tmpfs": {1: 99.5, 2: 98.0, 4: 93.0, 8: 61.0}, "local": {1: 96.0, 2: 71.0, 4: 40.0, 8: 21.0}}
    data = [
        dataclasses.replace(
            base[b], run_id=f"{b}{n}", workload="resnet50", metric="au", unit="%", value=v, params={"accelerators": n}
        )
        for b, curve in au.items()
        for n, v in curve.items()
    ]
    page = report_html.build(write_store(tmp_path, "au", data))
    section = page[page.index('<section id="au">') :]
    section = section[: section.index("</section>")]
    assert section.count('class="chart line-chart"') == 1
    assert section.count('class="line"') == 2 and section.count('class="point"') == 8
    assert 'class="threshold"' in section and "AU threshold 90%" in section
    fed = re.findall(r"</span>(tmpfs|local)</td><td class=num>(\w+)</td>", section)
    assert dict(fed) == {"tmpfs": "4", "local": "1"}


def test_provenance_flags_hosts_that_differ(tmp_path):
    from iolab.report import html as report_html

    data = samples(CAMPAIGN)
    other = [
        dataclasses.replace(
            s,
            host="gpu02",
            metadata={**s.metadata, "host": {**s.metadata["host"], "hostname": "gpu02", "kernel": "6.1.0-18-amd64"}},
        )
        for s in data
        if s.host != "*"
    ]
    page = report_html.build(write_store(tmp_path, "two-hosts", data + other))
    assert "Hosts differ in: hostname, kernel." in page
    assert "6.1.0-18-amd64" in page and "6.18.44-fc-v657" in page
    alone = report_html.build(ResultStore(FIXTURES, CAMPAIGN))
    assert "Every host reported the same hardware and software." in alone


def test_flags_section_lists_the_flags_and_the_checks_not_applied():
    from iolab.report import html as report_html

    page = report_html.build(ResultStore(FIXTURES, CAMPAIGN))
    section = page[page.index('<section id="flags">') : page.index('<section id="provenance">')]
    assert section.count('badge bad">repeats_disagree') == 6
    assert "±17.7%" in section and "direct=1 (O_DIRECT)" in section and "(12 runs)" in section
    assert "6 of 12 runs comparable" in page


HOSTILE = """<script>alert(1)</script> & "it's\""""


def test_html_report_escapes_names_from_the_campaign(tmp_path):
    """Campaign, workload and backend names are data: the page shows them as text, never as markup."""
    from html.parser import HTMLParser

    from markupsafe import escape

    from iolab.report import html as report_html

    names = {"campaign": f"c {HOSTILE}", "workload": f"w {HOSTILE}", "backend": f"b {HOSTILE}"}
    data = [
        dataclasses.replace(
            s,
            campaign=names["campaign"],
            workload=names["workload"] if s.workload == "seq-read" else s.workload,
            backend=names["backend"] if s.backend == "local" else s.backend,
        )
        for s in samples(CAMPAIGN)
    ]
    page = report_html.build(write_store(tmp_path, "hostile", data))

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.tags: list[str] = []
            self.text: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)

        def handle_data(self, data):
            self.text.append(data)

    parsed = Text()
    parsed.feed(page)
    assert "script" not in parsed.tags and "<script" not in page.lower()
    shown = "".join(parsed.text)
    for name in names.values():
        assert name in shown, name  # as text, quotes and all
        assert str(escape(name)) in page, name  # escaped by the template (autoescape), not by hand


def test_the_report_templates_ship_with_the_package():
    """The templates are package data: in the installed iolab, and matched by pyproject's package-data globs."""
    import fnmatch
    import importlib.resources
    import tomllib

    from iolab.report import html as report_html

    templates = importlib.resources.files("iolab.report") / "templates"
    names = sorted(t.name for t in templates.iterdir() if t.is_file() and not t.name.startswith("."))
    assert {"report.html.j2", "macros.html.j2", "report.css.j2"} <= set(names)
    assert report_html.TEMPLATE in names
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["iolab.report"]
    for name in names:
        assert any(fnmatch.fnmatch(f"templates/{name}", g) for g in globs), f"{name} would not be installed"
    environment = report_html._templates()
    assert environment.autoescape is True and sorted(environment.list_templates()) == names


def test_telemetry_lines_without_the_parser_are_read_by_their_numeric_fields(tmp_path):
    from iolab.report import telemetry as report_telemetry

    (tmp_path / "telemetry.jsonl").write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"type": "start", "t": 100.0},
                {"t": 101.0, "disk": {"vda": {"rB_s": 5e6, "busy": True}}, "load": 1.5, "note": "x"},
                {"t": 102.0, "disk": {"vda": {"rB_s": 7e6}}, "load": 0.5},
                "not an object",
                {"no": "t"},
            ]
        )
        + "\ntorn"
    )
    series = report_telemetry._generic_series(tmp_path / "telemetry.jsonl")
    assert series == {"disk.vda.rB_s": [(101.0, 5e6), (102.0, 7e6)], "load": [(101.0, 1.5), (102.0, 0.5)]}
    charts = {base: (lines_, unit) for base, lines_, unit in report_telemetry.telemetry_charts(series)}
    assert charts["disk.rB_s"] == ({"vda": series["disk.vda.rB_s"]}, "B/s")
    assert charts["load"] == ({"load": series["load"]}, "")


def test_byte_settings_carry_a_unit_and_settings_sort_by_value_not_text(tmp_path, results):
    """object_size 65536/1048576/16777216 and threads 8/16: as text they would sort 1048576 < 16777216 < 65536
    and 16 < 8; the report, the winners, the HTML page and compare give them in value order, with units."""
    from iolab.report import html as report_html

    base = {
        b: next(s for s in samples(CAMPAIGN) if s.host == "*" and s.metric == "read_bw" and s.backend == b)
        for b in ("tmpfs", "local")
    }
    data = [
        dataclasses.replace(
            base[b],
            run_id=f"{b}-{size}-{threads}-{rep}",
            repetition=rep,
            workload="objects",
            value=base[b].value * (1 + size / 2**24) * (1 + rep / 100),
            params={"object_size": size, "threads": threads},
        )
        for b in base
        for size in (1 << 20, 1 << 24, 1 << 16)
        for threads in (16, 8)
        for rep in (1, 2)  # two repeats: "who wins" compares a point measured at least twice
    ]
    store = write_store(tmp_path, "objects", data)
    want = [
        f"objects object_size={size} threads={threads}" for size in ("64KiB", "1MiB", "16MiB") for threads in (8, 16)
    ]
    rows = list(report.table(store).groups.values())  # each point's line, above its metrics
    assert [c for c in rows if c.startswith("objects")] == want
    found = who_wins.winners(who_wins.summarize(data))
    assert [report.point_label(w["workload"], w["setting_label"]) for w in found] == want
    page = report_html.build(store)
    throughput = page[page.index('<section id="throughput">') :]
    throughput = throughput[: throughput.index("</section>")]
    at = [throughput.index(label.removeprefix("objects ")) for label in want]
    assert at == sorted(at)
    a, b = (compare.Side(f"objects:{backend}", data, backend) for backend in ("tmpfs", "local"))
    points = compare.compare(a, b, [compare.parse_rule("read_bw >= -5%")]).points
    assert [report.point_label(p.workload, p.setting_label) for p in points] == want


def test_a_host_that_started_past_the_runs_skew_bound_is_flagged_but_stays_comparable():
    """Issue 37, defect 5: a host of a run on several that started late was not said anywhere but in its metadata."""
    original = host_sample(backend="tmpfs")
    late = dataclasses.replace(original, metadata={**original.metadata, "start_skew_s": 2.5, "start_skew_max_s": 1.0})
    on_time = dataclasses.replace(late, metadata={**late.metadata, "start_skew_s": 0.004})
    alone = dataclasses.replace(original, metadata={**original.metadata, "start_skew_s": 2.5})  # one host: no bound
    flags, reasons = host_flags.sample_flags(late)
    assert "start_skewed" in flags
    assert any("started 2.5 s after the hosts' common start, more than start_skew_max (1 s)" in r for r in reasons)
    assert "start_skewed" not in host_flags.sample_flags(on_time)[0] + host_flags.sample_flags(alone)[0]
    assert not host_flags.Flag("start_skewed", "late").blocking


def test_the_report_without_a_campaign_takes_this_users_latest_not_anyones(tmp_path):
    """On a shared controller another user's campaign may be the one written to last: `./lab report` shows the
    latest this user ran (its ledger's held_by), and anyone's latest only where this user ran none."""
    import getpass
    import os

    from iolab.store import ledger

    fixture = FIXTURES / "fio-tmpfs"
    for name, user, when in (("mine", getpass.getuser(), 1_000_000), ("theirs", "someone-else", 2_000_000)):
        shutil.copytree(fixture, tmp_path / name)
        samples = (
            (tmp_path / name / "samples.jsonl").read_text().replace('"campaign":"fio-tmpfs"', f'"campaign":"{name}"')
        )
        (tmp_path / name / "samples.jsonl").write_text(samples)
        led = {"schema": ledger.SCHEMA, "id": name * 4, "name": name, "held_by": {"user": user, "controller": "ctl01"}}
        (tmp_path / name / ledger.FILE).write_text(json.dumps(led))
        os.utime(tmp_path / name / "samples.jsonl", (when, when))
    assert report.find_store(tmp_path, None).dir.name == "mine"
    (tmp_path / "mine" / ledger.FILE).unlink()  # a store that does not say who ran it: anyone's latest
    assert report.find_store(tmp_path, None).dir.name == "theirs"
