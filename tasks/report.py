"""./lab report.*: what the results say."""

from __future__ import annotations

import sys

from invoke import Collection
from rich.console import Console

from iolab import paths
from iolab.errors import UserError
from iolab.measures import metrics
from iolab.report import compare_export
from iolab.report import tables as report_mod
from iolab.run.cli import echo, user_errors
from iolab.units import printable

from .common import task

# --- report ------------------------------------------------------------------------------


@task(
    default=True,
    help={
        "campaign": "campaign name (default: the latest with results of those you ran, else anyone's latest)",
        "format": "table | html (writes results/<campaign>/report.html) | csv | json | mlperf (MLPerf Storage's "
        "results columns)",
        "units": "byte figures of table and html: iec (GiB/s, the default) | si (GB/s)",
    },
)
@user_errors
def show(c, campaign=None, format="table", units=None):
    """Compare backends: who wins, median and spread over repetitions, validity flags."""
    if units is not None and format in ("csv", "json"):
        raise UserError(
            f"--units is for the table and the html page; {format} keeps canonical units "
            "(its unit column: B/s, IOPS, ns, ...)"
        )
    units = units or report_mod.DEFAULT_UNITS
    report_mod.unit_scale("B/s", 1.0, units)  # an unknown system is refused before any work
    store = report_mod.find_store(paths.results_root(), campaign)
    if format == "table":
        from iolab.report import kvcache as report_kvcache
        from iolab.report import replay as report_replay

        report_mod.print_report(store, units=units, leads=report_kvcache.LEADS + report_replay.LEADS)
    elif format == "html":
        from iolab.report import html as report_html

        echo(str(report_html.write(store, units)))
    elif format in ("csv", "json"):
        echo(report_mod.export(store, format))
    elif format == "mlperf":
        from iolab.report import mlperf as report_mlperf
        from iolab.report import mlperf_kv as report_mlperf_kv

        samples = store.samples()
        echo(report_mlperf.text(samples, report_mlperf_kv.text(store, samples)))
    else:
        raise UserError(f"unknown report format {format!r}; use table, html, csv, json or mlperf")
    _say_skipped(store)


def _say_skipped(*stores):
    """The lines of a store a report skipped (not samples), one line each on stderr, beside the report."""
    for store in dict.fromkeys(s for s in stores if s is not None):  # one campaign's backends: one store
        if note := store.skipped_note():
            print(f"iolab: {printable(note)}", file=sys.stderr)


@task(
    positional=["a", "b"],
    iterable=["rule"],
    help={
        "a": "baseline: a campaign, or with --campaign a backend of it",
        "b": "compared with A: a campaign, or with --campaign a backend of it",
        "campaign": "compare two backends A and B of this campaign instead of two campaigns",
        "rule": "acceptance rule, repeatable: 'read_bw >= -5%', 'read_clat_p99 <= +10%'",
        "rules": "YAML file with rules: [...]",
        "format": "table | junit (JUnit XML, a test case per rule and point) | json; on stdout",
    },
)
@user_errors
def compare(c, a, b, campaign=None, rule=None, rules=None, format="table"):
    """B against A: ratio per metric with a 95% confidence interval; exit 1 when a rule is broken."""

    from iolab.report import compare as compare_mod

    writers = {"junit": compare_export.to_junit, "json": compare_export.to_json}
    if format != "table" and format not in writers:
        raise UserError(f"unknown compare format {format!r}; use table, junit or json")
    result = compare_mod.run(paths.results_root(), a, b, campaign, rule or [], rules)
    _say_skipped(result.a.store, result.b.store)
    violations = result.violations()
    if format == "table":
        Console().print(compare_mod.table(result, metrics.ordered("table")))
        for line in violations:
            echo(line)
    else:
        echo(writers[format](result))
    if violations:
        raise compare_mod.Regression(
            f"{len(violations)} rule violation(s): {result.b.label} regressed against {result.a.label}"
        )


@task(
    iterable=["metric", "rule"],
    help={
        "metric": "metric to draw over time, repeatable (default: the figures of merit: read_bw, IOPS, samples/s, AU…)",
        "backend": "only this backend",
        "workload": "only this workload",
        "rule": "regression rule between a point and the one before, repeatable, as report.compare's "
        "(default: 5% the worse way for each metric)",
        "rules": "YAML file with rules: [...]",
        "format": "table | html (writes results/history.html) | json",
    },
)
@user_errors
def history(c, metric=None, backend=None, workload=None, rule=None, rules=None, format="table"):
    """Past campaigns (moved-aside stores too), then each metric per backend and workload over time."""
    from rich.console import Console

    from iolab.report import history as history_mod
    from iolab.report import history_series

    if format not in ("table", "html", "json"):
        raise UserError(f"unknown history format {format!r}; use table, html or json")
    found, used = history_series.run(paths.results_root(), metric or [], backend, workload, rule or [], rules)
    if format == "json":
        echo(history_series.to_json(found))
    elif format == "html":
        from iolab.report import history_html

        echo(str(history_html.write(found, used, paths.results_root())))
    else:
        Console().print(history_mod.table(paths.results_root()))
        Console().print(history_series.table(found, used))


report = Collection("report", show, compare, history)
