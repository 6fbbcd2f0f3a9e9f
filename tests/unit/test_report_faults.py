"""The report side of faulted runs (iolab.report_faults, svg's marks) and report.compare on recovery figures,
whose baseline is often 0 (a time to recover where the clients never slowed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iolab import compare, compare_export, report_faults, svg
from iolab.samples import ResultStore, Sample


def sample(backend: str, metric: str, value: float, unit: str, run: str, **params) -> Sample:
    return Sample(
        campaign="c",
        run_id=run,
        repetition=1,
        host="*",
        backend=backend,
        workload="seq",
        metric=metric,
        value=value,
        unit=unit,
        started_at="2026-11-28T09:00:00Z",
        ended_at="2026-11-28T09:01:00Z",
        params={"profile": "seq-read-1m", **params},
        metadata={"faults": {"start_at": 1000.0, "events": [], "window_s": [10.0, 30.0]}},
    )


def store(results: Path, name: str, samples: list[Sample]) -> None:
    (results / name).mkdir(parents=True)
    (results / name / "samples.jsonl").write_text("".join(s.to_json() + "\n" for s in samples))


@pytest.mark.parametrize(
    ("a", "b", "outcome", "says"),
    [
        (0.0, 7.0, "failed", "has a median of 7 s (1) where vendor-a has 0 (1): a rise from 0 is past any upper bound"),
        (0.0, 0.0, "passed", "0 on both sides, unchanged"),
        (10.0, 11.0, "passed", "holds 'time_to_90pct <= +20%'"),
        (10.0, 13.0, "failed", "(+30.0%"),
    ],
)
def test_two_vendors_recovery_times_are_compared_with_the_rules_syntax(tmp_path, a, b, outcome, says):
    store(tmp_path, "vendor-a", [sample("ceph", "time_to_90pct", a, "s", "r1", after="heal")])
    store(tmp_path, "vendor-b", [sample("ceph", "time_to_90pct", b, "s", "r2", after="heal")])
    result = compare.run(tmp_path, "vendor-a", "vendor-b", None, ["time_to_90pct <= +20%"], None)
    (check,) = result.checks()
    assert check.outcome == outcome and says in check.message, check.message
    assert (result.violations() != []) == (outcome == "failed")
    # A lower bound is not broken by a rise from 0 (a dip that got shallower is no regression).
    if a == 0 and b > 0:
        store(tmp_path, "dip-a", [sample("ceph", "dip", 0.0, "%", "r3")])
        store(tmp_path, "dip-b", [sample("ceph", "dip", 40.0, "%", "r4")])
        assert compare.run(tmp_path, "dip-a", "dip-b", None, ["dip >= -10%"], None).violations() == []


def test_a_rule_on_recovery_times_that_were_all_0_is_judged_not_refused(tmp_path):
    store(tmp_path, "a", [sample("x", "time_to_90pct", 0.0, "s", "r1", after="injection")])
    store(tmp_path, "b", [sample("x", "time_to_90pct", 0.0, "s", "r2", after="injection")])
    document = json.loads(
        compare_export.to_json(compare.run(tmp_path, "a", "b", None, ["time_to_90pct <= +20%"], None))
    )
    assert document["regressions"] == 0
    assert [c["outcome"] for p in document["points"] for c in p["checks"]] == ["passed"]


def test_the_sparkline_marks_the_seconds_of_the_faults():
    points = [(float(t), v) for t, v in zip(range(1, 11), [8, 8, 8, 0, 0, 0, 4, 8, 8, 8], strict=True)]
    line, under = report_faults.spark(points, [(3.5, "osd_stop injected"), (6.2, "osd_stop healed")]).split("\n")
    assert line == "███▁▁▁▅███"
    assert under == "   ^  ^"  # 3.5 s lies in the fourth second, (3, 4]; 6.2 s in the seventh, (6, 7]


def test_a_line_chart_marks_each_event_with_its_label():
    chart = svg.line_chart(
        {"gpu01": [(1.0, 5.0), (2.0, 0.0)]}, "B/s", "s", marks=[(1.5, "osd_stop <injected>")], x_min=0
    )
    assert chart.count('class="mark"') == 1
    assert "osd_stop &lt;injected&gt;" in chart and "<injected>" not in chart


def test_a_store_without_faults_has_no_faults_section(tmp_path):
    plain = sample("ceph", "read_bw", 1e9, "B/s", "r1")
    plain = Sample(**{**plain.__dict__, "metadata": {}})
    store(tmp_path, "plain", [plain])
    assert report_faults.section(ResultStore(tmp_path, "plain"), [plain], "iec", lambda u, t, s: (1.0, u)) is None
    assert report_faults.table(ResultStore(tmp_path, "plain"), [plain]) is None


def test_a_time_back_the_runs_end_came_before_is_said_not_left_blank():
    """The rate not back at 90 % by the series' end has no figure (iolab.parsers.faults.time_to gives None): the
    table says so rather than leaving the row out or a dash that reads as "no fault"."""
    heal = {"type": "heal", "by": "schedule", "ok": True, "at_s": 30.0}
    felt = [
        sample("ceph", "dip", 0.0, "%", "r1"),
        sample("ceph", "time_to_90pct", 4.0, "s", "r1", after="injection"),  # back once, before the heal
    ]
    run = report_faults.Faulted(
        run_id="r1", backend="ceph", workload="seq", repetition=1, start_at=1000.0, events=[heal], rate="read_bw",
        hosts=["localhost"], series={}, cluster={}, samples=felt,
    )  # fmt: skip
    _, table = report_faults.rows(run)
    said = {row[0]: row[1] for row in table}
    assert said["to 90 % after the injection"] == "4 s"
    assert said["to 90 % after the heal"] == report_faults.NOT_BACK == "not back by the end"
    # without a heal on the schedule there is no time after it to miss; without a dip nothing was felt
    run.events = []
    assert "to 90 % after the heal" not in {row[0] for row in report_faults.rows(run)[1]}
    assert "cluster back to its health" not in {row[0] for row in report_faults.rows(run)[1]}  # not polled
    run.samples = [felt[1]]
    assert "to 99 % after the injection" not in {row[0] for row in report_faults.rows(run)[1]}
