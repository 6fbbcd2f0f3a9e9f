"""The terminal report at 80 columns: the main job's store (tests/report_stores.py: the report fixture's real fio
runs and an accelerator search per backend, with its flags) read as a user's terminal shows it.

What is checked is what a reader needs: no line wider than the terminal, each flag a name and a mark in its
cell with its reason once under the table, every name whole, and "who wins" without the rows that compare
nothing (a search's single probes).
"""

from __future__ import annotations

import io
import re
from collections import defaultdict

import pytest
from report_stores import main_job
from rich.cells import cell_len
from rich.console import Console

from iolab.measures import metrics, validity
from iolab.measures.samples import AGGREGATE_HOST
from iolab.report import tables as report
from iolab.report.layout import NAME, NUMBER, Column, Fitted

VENDOR = {"tmpfs": "vendor-a-nvme-east", "local": "vendor-b-nvme-west", "resnet50-h100": "resnet50-h100-packed"}


def printed(store, columns: int) -> str:
    """The report as `./lab report` prints it on a terminal of `columns` (Rich reads COLUMNS)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("COLUMNS", str(columns))
        console = Console(file=io.StringIO(), record=True)
    assert console.width == columns
    report.print_report(store, console)
    return console.export_text()


def section(text: str, start: str, end: str | None) -> str:
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    last = next((i for i, line in enumerate(lines) if end and i > first and line.startswith(end)), len(lines))
    return "\n".join(lines[first:last])


def flat(text: str) -> str:
    """The text with its wrapping undone: the words of a wrapped note joined again."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return main_job(tmp_path_factory.mktemp("layout") / "results")


@pytest.fixture(scope="module")
def text(store) -> str:
    return printed(store, 80)


def notes_of(text: str) -> str:
    """The notes under a table: from its [1] on."""
    lines = text.splitlines()
    return "\n".join(lines[next(i for i, line in enumerate(lines) if line.lstrip().startswith("[1] ")) :])


def test_the_main_job_reads_at_80_columns_answer_first_each_flag_a_footnote(store, text):
    lines = text.splitlines()
    assert max(cell_len(line) for line in lines) <= 80
    assert lines[0].startswith("campaign report-fixture: how many emulated accelerators per host")
    samples = store.samples()
    verdict = section(text, "campaign report-fixture: how many", "MLPerf Storage counts")
    answers = [s for s in samples if s.metric == report.VERDICT_METRIC and s.host == AGGREGATE_HOST]
    verdicts = validity.assess(samples)
    why = [f for s in answers for f in s.metadata["flags"]]  # the search's own: host-bound, disturbed
    why += [f.reason for s in answers for f in verdicts.of(s.metadata["at"]["run_id"]) if f.blocking]
    assert len(why) == 4 and "measures this host, not the storage" in why
    notes = notes_of(verdict)
    table = verdict[verdict.index("─") : verdict.index(notes)]  # its rows (the limit lines above say theirs)
    for reason in why:  # once, under the table; never in a cell
        assert flat(notes).count(flat(reason)) == 1 and flat(reason) not in flat(table), reason
    marks = [line for line in table.splitlines() if "⚑" in line]
    assert len(marks) == 4 and all(re.fullmatch(r"\s+⚑ [a-z_-]+ \[[1-4]\]\s*", line) for line in marks)
    answered = [line.split()[:4] for line in table.splitlines() if re.match(r"  (tmpfs|local) ", line)]
    assert answered == [["tmpfs", "6", "h100", "(6–7)"], ["local", "2", "h100", "(2–3)"]]
    flags = section(text, "flags: runs", None)
    found = validity.assess(report.figures(samples))  # the figures' flags: the flags table's
    reasons = {f.reason for run in found.flags for f in found.of(run)}
    assert len(reasons) > 10
    for reason in reasons:  # the same reason once, however many runs have it
        assert flat(notes_of(flags)).count(flat(reason)) == 1, reason


def test_who_wins_leaves_out_the_search_probes_measured_once(store, text):
    wins = section(text, "campaign report-fixture: who wins", "campaign report-fixture: median")
    for point in ("seq-read", "rand-read iodepth=1", "rand-read iodepth=16"):  # the fio points: 2 repeats each
        assert any(line.strip() == point for line in wins.splitlines()), point
    assert "resnet50-h100" not in wins
    runs: dict[tuple[int, str], set[str]] = defaultdict(set)
    measured = set()
    for s in store.samples():
        if "accelerators" in s.params:  # a probe
            runs[(s.params["accelerators"], s.backend)].add(s.run_id)
            measured.add(s.metric)
    both = sorted(n for n, b in runs if b == "tmpfs" and (n, "local") in runs)
    once = [n for n in both if min(len(runs[(n, "tmpfs")]), len(runs[(n, "local")])) == 1]
    assert once == [1, 2, 4]
    left_out = len(once) * len(measured & set(metrics.named("wins")))
    assert f"Left out: {left_out} point(s) a backend measured once" in flat(wins)


def test_a_search_answers_flags_are_named_in_every_flags_table(store):
    """validity reads an answer's metadata.flags (sentences) as flag names: the flags table (the page lists every
    run's) shows them by a short name, the sentence its reason."""
    rows = report.flag_rows(store.samples())
    assert all(re.fullmatch(r"[a-z_-]+", r["flag"]) for r in rows), {r["flag"] for r in rows}
    host = next(r for r in rows if r["flag"] == "host-bound")
    assert host["reason"] == "measures this host, not the storage" and host["backend"] == "tmpfs"
    assert any(r["flag"] == "disturbed" and r["reason"].startswith("foreign CPU") for r in rows)


def test_names_are_whole_at_80_columns_even_a_vendors_longer_ones(tmp_path):
    text = printed(main_job(tmp_path / "results", VENDOR), 80)
    assert max(cell_len(line) for line in text.splitlines()) <= 80 and "…" not in text
    verdict = section(text, "campaign report-fixture: how many", "campaign report-fixture: who wins")
    wins = section(text, "campaign report-fixture: who wins", "campaign report-fixture: median")
    for name in ("vendor-a-nvme-east", "vendor-b-nvme-west", "resnet50-h100-packed"):
        assert re.search(rf"(^|\s){name}(\s|$)", verdict, re.MULTILINE), name
    # "who wins" cannot fit its longest point, metric and both names on one line at 80: it wraps at words only
    for name in ("vendor-a-nvme-east", "vendor-b-nvme-west", "seq-read", "rand-read", "iodepth=16", "read_clat_p99"):
        assert re.search(rf"(^|\s){name}(\s|$)", wins, re.MULTILINE), name


def test_a_table_that_cannot_fit_folds_names_whole_never_cuts_them():
    """Two names that share their first 30 characters, in 30 columns: each still reads in full, folded."""
    names = ["vendor-a-nvme-over-fabrics-cluster-east", "vendor-a-nvme-over-fabrics-cluster-west"]
    table = Fitted([Column("backend", NAME), Column("read_bw (GiB/s)", NUMBER)])
    for index, name in enumerate(names):
        table.add_row(name, f"{index + 1}.25")
    console = Console(file=io.StringIO(), record=True, width=30)
    console.print(table)
    lines = console.export_text().splitlines()
    assert max(cell_len(line) for line in lines) <= 30 and "…" not in "".join(lines)
    rows: list[str] = []
    for line in lines[next(i for i, line in enumerate(lines) if line.startswith("─")) + 1 :]:  # under the header
        name, _, figure = line.rstrip().rpartition(" ")
        if re.fullmatch(r"\d\.25", figure):
            rows.append(name.strip())
        else:
            rows[-1] += line.strip()
    assert rows == names


def test_a_table_that_fits_is_left_at_its_natural_widths():
    table = Fitted([Column("workload"), Column("by", NUMBER)])
    table.add_row("rand-read iodepth=16", "1,808× lower")
    assert table.widths(80, 2) == [None, None]
    assert table.widths(30, 2) == [16, None]  # its words kept: "iodepth=16" wraps under "rand-read"
