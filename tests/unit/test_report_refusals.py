"""Reports and report.compare fail closed (issue 23): a lost metric breaks a rule, a bad line is skipped and
said, a name from the samples never reaches the terminal as markup or a control sequence, a path is not a
campaign name, a rule that cannot hold is refused.

Every case runs `./lab report ...` as a user does, on the real fixture campaign (tests/fixtures/report)
with the one thing changed that the case is about.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from iolab.errors import UserError
from iolab.report import compare
from support import Cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report"
CAMPAIGN = "report-fixture"  # tmpfs vs local, seq-read + rand-read iodepth 1/16, 2 repetitions
FORMATS = ("table", "json", "junit")


def fixture_lines() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / CAMPAIGN / "samples.jsonl").read_text().splitlines()]


def write(results: Path, name: str, data: list[dict], extra: bytes = b"") -> None:
    (results / name).mkdir(parents=True)
    text = "".join(json.dumps(d) + "\n" for d in data).encode()
    (results / name / "samples.jsonl").write_bytes(text + extra)


def one_line(done) -> str:
    """The command's stderr: one line (iolab's own), never a traceback."""
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr.strip()


# --- a total loss breaks the rule ----------------------------------------------------------------


def loss(results: Path, how: str) -> None:
    """baseline: the fixture; candidate: the same with every read_bw at 0, or without any read_bw."""
    data = fixture_lines()
    write(results, "baseline", data)
    if how == "zero":
        write(results, "candidate", [{**d, "value": 0.0} if d["metric"] == "read_bw" else d for d in data])
    else:
        write(results, "candidate", [d for d in data if d["metric"] != "read_bw"])


@pytest.mark.parametrize("how", ["zero", "vanished"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_metric_lost_entirely_breaks_the_rule_in_every_format(tmp_path, how, fmt):
    loss(tmp_path, how)
    done = Cli(tmp_path)(
        "report.compare", "baseline", "candidate", "--rule", "read_bw >= -5%", "--format", fmt, check=False
    )
    assert done.returncode == 1
    assert one_line(done) == "iolab: 6 rule violation(s): candidate regressed against baseline"
    if fmt == "table":
        lost = [line for line in done.stdout.splitlines() if line.startswith("REGRESSION")]
        assert len(lost) == 6 and all("lost entirely; breaks 'read_bw >= -5%'" in line for line in lost), lost
    elif fmt == "json":
        doc = json.loads(done.stdout)
        read_bw = [p for p in doc["points"] if p["metric"] == "read_bw"]
        assert doc["regressions"] == 6 and len(read_bw) == 6
        assert all(p["lost"] and [c["outcome"] for c in p["checks"]] == ["failed"] for p in read_bw)
    else:
        suite = ET.fromstring(done.stdout).find("testsuite")
        assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("6", "6", "0")


@pytest.mark.parametrize("with_params", [True, False])
def test_a_workload_whose_every_run_failed_in_b_is_lost_not_skipped(tmp_path, with_params):
    """Issue 37: every run of B's rand-read failed (runs.jsonl says so, no samples): compare passed, rc 0, JUnit 0
    failures. Its points are lost; from a store of an older iolab, whose records carry no params, as well."""
    data = fixture_lines()
    write(tmp_path, "baseline", data)
    write(tmp_path, "candidate", [d for d in data if d["workload"] != "rand-read"])
    records = [
        {
            "run_id": f"r{i}",
            "host": "localhost",
            "backend": backend,
            "workload": "rand-read",
            "repetition": 1,
            "status": "failed",
            "error": "fio exited 1: io_u error",
            **({"params": {"iodepth": iodepth, "numjobs": 1, "profile": "rand-read-16k"}} if with_params else {}),
        }
        for i, (backend, iodepth) in enumerate((b, d) for b in ("local", "tmpfs") for d in (1, 16))
    ]
    (tmp_path / "candidate" / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    done = Cli(tmp_path)(
        "report.compare", "baseline", "candidate", "--rule", "read_bw >= -5%", "--format", "junit", check=False
    )
    assert done.returncode == 1, done.stdout + done.stderr
    suite = ET.fromstring(done.stdout).find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("6", "4")  # seq-read held on both backends


def test_a_lost_metric_is_not_a_rule_that_matches_nothing(tmp_path):
    loss(tmp_path, "zero")
    base, cand = compare.sides(tmp_path, "baseline", "candidate")
    result = compare.compare(
        base, cand, [compare.parse_rule("read_clat_p99 <= +10%"), compare.parse_rule("read_bw > -100%")]
    )
    assert [p.metric for p in result.points if p.violations] == ["read_bw"] * 6  # latency still judged, and held


# --- a rule that can never hold ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("read_bw <= -200%", "can never hold"),
        ("read_bw < -100%", "can never hold"),
        ("read_bw >= -150%", "guards nothing"),
    ],
)
def test_a_rule_that_cannot_hold_or_cannot_fail_is_refused_as_it_is_read(tmp_path, text, why):
    with pytest.raises(UserError, match=f"rule '{text}' {why}: B/A − 1 is never below -100%"):
        compare.parse_rule(text)
    loss(tmp_path, "zero")
    done = Cli(tmp_path)("report.compare", "baseline", "candidate", "--rule", text, check=False)
    assert done.returncode == 2 and why in one_line(done) and done.stdout == ""


def test_a_rule_at_minus_100_percent_says_not_lost():
    assert compare.parse_rule("read_bw >= -100%").limit == -1


# --- a campaign name is not a path ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../outside", "/tmp", "a/b", ".", ""])
def test_a_campaign_that_is_a_path_is_refused(tmp_path, name):
    results = tmp_path / "results"
    write(tmp_path, "outside", fixture_lines())  # a store beside results/, which ../outside would reach
    (results / CAMPAIGN).mkdir(parents=True)
    cli = Cli(results)
    for argv in (["report", "--campaign", name, "--format", "html"], ["report.compare", name, CAMPAIGN]):
        done = cli(*argv, check=False)
        assert done.returncode == 2 and "is not a campaign name" in one_line(done), done.stderr
    assert not (tmp_path / "outside" / "report.html").exists()


# --- a line that is not a sample ---------------------------------------------------------------------

BAD = b'{"value": NaN}\n[1]\n' + json.dumps({**fixture_lines()[0], "value": float("inf")}).encode() + b"\nnot json\n"


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "html"])
def test_reports_skip_the_lines_that_are_not_samples_and_say_so(tmp_path, fmt):
    write(tmp_path, CAMPAIGN, fixture_lines(), BAD)
    done = Cli(tmp_path)("report", "--campaign", CAMPAIGN, "--format", fmt)
    total = len(fixture_lines())
    assert one_line(done).startswith(f"iolab: skipped 4 line(s) of {tmp_path / CAMPAIGN} that are not records: ")
    assert f"samples.jsonl line {total + 1}: NaN is not a finite number" in done.stderr
    if fmt == "json":
        assert len(json.loads(done.stdout)) == total  # valid JSON: no NaN, no Infinity
    elif fmt == "csv":
        assert len(list(csv.DictReader(io.StringIO(done.stdout)))) == total
    elif fmt == "table":
        assert "∞" not in done.stdout


def test_compare_and_history_skip_them_too(tmp_path):
    write(tmp_path, "baseline", fixture_lines(), BAD)
    write(tmp_path, "candidate", fixture_lines())
    cli = Cli(tmp_path)
    done = cli("report.compare", "baseline", "candidate", "--rule", "read_bw >= -5%")
    assert done.returncode == 0
    assert one_line(done).startswith(f"iolab: skipped 4 line(s) of {tmp_path / 'baseline'}")
    history = cli("report.history")
    assert "4 bad lines skipped" in history.stdout and "Traceback" not in history.stderr


# --- names from the samples ------------------------------------------------------------------------

MARKUP = "tm[/x]pfs"
ESCAPES = "lo\x1b]0;owned\x07cal\x1b[2J\u009b31m"


def named(results: Path) -> None:
    """The fixture with a backend named as Rich markup and one with terminal escapes (ANSI, OSC, C1)."""
    rename = {"tmpfs": MARKUP, "local": ESCAPES}
    write(results, CAMPAIGN, [{**d, "backend": rename[d["backend"]]} for d in fixture_lines()])


def assert_no_controls(text: str) -> None:
    assert not any(ch in text for ch in "\x1b\x07\u009b"), repr(text[:200])


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "html"])
def test_a_name_reaches_no_report_as_markup_or_a_control_sequence(tmp_path, fmt):
    named(tmp_path)
    done = Cli(tmp_path)("report", "--campaign", CAMPAIGN, "--format", fmt)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    out = (tmp_path / CAMPAIGN / "report.html").read_text() if fmt == "html" else done.stdout
    assert_no_controls(out)
    if fmt in ("table", "csv"):
        assert MARKUP in out and "lo\\u001b]0;owned\\u0007cal" in out


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_name_reaches_no_comparison_as_markup_or_a_control_sequence(tmp_path, fmt):
    named(tmp_path)
    cli = Cli(tmp_path)
    argv = ["report.compare", MARKUP, ESCAPES, "--campaign", CAMPAIGN, "--rule", "read_bw >= -5%", "--format", fmt]
    done = cli(*argv, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert_no_controls(done.stdout + done.stderr)
    if fmt == "json":
        assert json.loads(done.stdout)["candidate"] == ESCAPES  # the name itself, escaped as JSON escapes it
    elif fmt == "junit":
        ET.fromstring(done.stdout)  # well-formed XML: no control character in it
    else:
        assert MARKUP in done.stdout


def test_the_history_writes_names_out_too(tmp_path):
    named(tmp_path)
    shutil.copytree(tmp_path / CAMPAIGN, tmp_path / "tm[/x]")
    done = Cli(tmp_path)("report.history")
    assert done.returncode == 0 and "tm[/x]" in done.stdout
    assert_no_controls(done.stdout)
