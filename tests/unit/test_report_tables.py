"""Every table `./lab` prints, at 80 columns (issue 44, 8): report.history, status, results.index, report.compare,
the KV-cache answer and trials, the faults section: no line wider than the terminal, no `…`, and every name and
figure of the data whole on a line (a word of its own: never cut, never folded onto the next line).

The stores are the report's fixtures: the main job (tests/report_stores.py: real fio runs and an accelerator search
per backend), two copies of its fio runs moved aside (store names that share their first 26 characters, as
`rel5-f1.<stamp>` did), fio-tmpfs, the faulted campaigns of tests/fixtures/report_faults (their samples made again
from their files, as `results.reparse --write` makes them) and a KV-cache campaign with a vendor's long names.
"""

from __future__ import annotations

import io
import re
import shutil
import statistics

import pytest
from report_stores import FIXTURES, KV_TRIALS, NAME, kv_cache, main_job
from rich.cells import cell_len
from rich.console import Console

from iolab.measures.samples import ResultStore
from iolab.report import compare, database, history, history_series, status
from iolab.report import faults as report_faults
from iolab.report import kvcache as report_kvcache
from iolab.report import tables as report
from iolab.report.faults import ROWS
from iolab.results import check as results_check
from iolab.results import index as results_index
from iolab.store import reparse

FAULTS = FIXTURES.parent / "report_faults"
MOVED = ("report-fixture.20261120T060000Z", "report-fixture.20261121T060000Z")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("tables") / "results"
    main_job(root)
    for moved in MOVED:
        shutil.copytree(FIXTURES / NAME, root / moved)
    shutil.copytree(FIXTURES / "fio-tmpfs", root / "fio-tmpfs")
    for faulted in ("report-faults", "osd-stop"):
        shutil.copytree(FAULTS / faulted, root / faulted)
        assert reparse.check(ResultStore(root, faulted), write=True)[1]
    kv_cache(root)
    return root


def printed(*shown: object) -> str:
    console = Console(file=io.StringIO(), record=True, width=80)
    for renderable in shown:
        console.print(renderable)
    return console.export_text()


def fits(text: str, words: list[str]) -> None:
    """Nothing wider than 80 columns, nothing cut, and each of `words` whole: a word of its own on a line."""
    assert max(cell_len(line) for line in text.splitlines()) <= 80, text
    assert "…" not in text and "e+0" not in text, text
    missing = [w for w in words if not re.search(rf"(?<!\S){re.escape(w)}(?!\S)", text)]
    assert not missing, f"not whole at 80 columns: {missing}\n{text}"


def stores(results) -> list[str]:
    return sorted(p.name for p in results.iterdir() if (p / "samples.jsonl").exists())


def test_status_names_each_store_and_each_rule_whole(results):
    found = status.collect(results)
    text = printed(status.table(found))
    rules = [f"{name} ({runs})" for s in found for name, (runs, _) in s.rules.items()]
    assert "host-bound (1)" in rules  # a search answer's sentence, by its short name
    fits(text, stores(results) + [str(n) for s in found for n in s.counts.values() if n])
    lines = [line.strip() for line in text.splitlines()]
    assert all(any(line.endswith(rule) or f"{rule} " in line for line in lines) for rule in rules), text
    fixture = next(s for s in found if s.store == NAME)
    assert len(text.splitlines()) <= 4 + len(found) + sum(max(1, len(s.rules)) for s in found), text
    assert len(fixture.rules) == 4  # one rule a line: the table's rows are as many as its rules, no more


def test_results_index_names_each_store_and_checksum_whole(results):
    found, line = results_check.run(results, rebuild=False)
    text = printed(database.agreement(found, results))
    checked = results_check.verify(results_index.open_index(results), results)
    fits(text, stores(results) + [a.file_checksum for a in checked])
    assert all(f"{a.file_samples} / {a.db_samples}" in text for a in checked) and line.startswith("7 store(s)")


def test_history_names_each_store_point_and_figure_whole_and_a_fault_by_its_kind(results):
    entries = history.campaigns(results)
    found, rules = history_series.run(results, [], None, None, [], None)
    text = printed(history.table(results), history_series.table(found, rules))
    figures = []
    for s in found:
        factor, _ = report.unit_scale(s.unit, max(p.median for p in s.points))
        figures += [report.number(p.median / factor) for p in s.points]
    fits(text, stores(results) + [e.config_hash for e in entries] + figures)
    assert "'what'" not in text and "osd_stop(osd.0)@10s–30s" in text and "link_down(gpu02)@8s–13s" in text
    served, _ = history_series.run(results, ["kv_served"], None, None, [], None)
    text = printed(history_series.table(served, []))
    fits(text, ["vendor-a-nvme-east", "vendor-b-nvme-west", "8", "2"])
    assert "count" not in text  # a count is a number: its metric's name says of what


@pytest.mark.parametrize(
    ("a", "b", "campaign"),
    [(MOVED[0], NAME, None), ("tmpfs", "local", NAME), ("vendor-a-nvme-east", "vendor-b-nvme-west", "kv-fixture")],
)
def test_compare_names_each_point_metric_and_figure_whole(results, a, b, campaign):
    done = compare.run(results, a, b, campaign, [], None)
    text = printed(compare.table(done))
    words = [p.metric for p in done.points] + [a, b]
    for p in done.points:
        factor, _ = report.unit_scale(p.unit, max(abs(statistics.median(v)) for v in (p.a, p.b) if v))
        words += [report.number(statistics.median(v) / factor) for v in (p.a, p.b) if v and not any(p.answers)]
        words += [report.number(p.ratio.ratio)] if p.ratio else []
    fits(text, words)


def test_the_kv_cache_answer_and_trials_show_every_figure_whole(results):
    samples = ResultStore(results, "kv-fixture").samples()
    text = printed(report_kvcache.verdict_table(samples), report_kvcache.trials_table(samples))
    words = list(KV_TRIALS)
    for trials in KV_TRIALS.values():
        for column, scale in ((0, 2**30), (1, 1e-3), (2, 1.0)):
            values = [t[column] / scale for t in trials]
            low, mid, high = (report.number(v) for v in (min(values), statistics.median(values), max(values)))
            words += [mid, f"[{low}–{high}]"]
    fits(text, words)
    assert "1012" in text  # tokens/s over a thousand: a number, never 1.01e+03


def test_the_faults_section_names_each_host_and_figure_whole(results):
    for faulted in ("report-faults", "osd-stop"):
        store = ResultStore(results, faulted)
        text = printed(report_faults.table(store, report.figures(store.samples())))
        hosts = sorted({s.host for s in store.samples() if s.host != "*"})
        fits(text, hosts + ["baseline"])


def test_a_faulted_runs_hosts_that_do_not_fit_80_columns_go_on_in_another_table():
    hosts = [f"gpu{i:02d}" for i in range(1, 9)] + ["all hosts"]
    figures = [[label, *(report_faults.NOT_BACK if i % 3 else "1.23 GiB/s" for i in range(9))] for *_, label in ROWS]
    shown = report_faults.ByHosts(hosts, figures)
    text = printed(shown)
    fits(text, [*hosts[:-1], "all", "hosts", "GiB/s", "1.23"])
    assert text.count(report_faults.NOT_BACK) == 6 * len(ROWS)  # every figure, whole
    # several tables, each naming the figures, every host in one of them
    assert text.count("baseline (median before)") == len(shown.chunks(80)) > 1
    assert sorted(i for chunk in shown.chunks(80) for i in chunk) == list(range(9))


# --- the HTML page's tables (issue 44, 9) ------------------------------------------------------------------------


def test_the_pages_per_backend_tables_order_points_by_value_not_text(tmp_path):
    """A search's probes at 1, 2, 4, 8 and 16 accelerators: in that order, not 1, 16, 2, 4, 8."""
    from report_stores import CLIENT, searched

    from iolab.report import html as report_html

    store = ResultStore(tmp_path, "probes")
    store.dir.mkdir(parents=True)
    store.add_samples(searched("tmpfs", lambda n: 95.0, 120e6, CLIENT))
    page = report_html.build(store)
    backends = page[page.index('<section id="backends">') : page.index('<section id="flags">')]
    order = [int(n) for n in re.findall(r"<td>resnet50-h100 accelerators=(\d+)</td>", backends)]
    assert order == sorted(order) and {1, 16} <= set(order), order


def test_the_page_says_one_run_not_one_runs(results, tmp_path):
    from iolab.report import html as report_html

    fio = ResultStore(results, "fio-tmpfs").samples()
    store = ResultStore(tmp_path, "fio-tmpfs")
    store.dir.mkdir(parents=True)
    store.add_samples([s for s in fio if s.run_id == fio[0].run_id])
    page = report_html.build(store)
    assert re.search(r"\b1 of 1 run comparable", page) and "1 runs" not in page
