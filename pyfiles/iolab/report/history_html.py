"""report.history's HTML page: each series over time, a backend's colour and marker, regressions ringed.

    ./lab report.history --format html        → results/history.html

One chart per (metric, workload, setting), a line per backend (vendor) with the backend's colour and
marker shape; each point is a campaign's median with its min–max whisker, and a point that breaks a
rule against the one before it (the rules of report.compare, iolab.report.history_series) is ringed in red
and listed at the top. The markup is the report's (iolab.report.html's templates and style sheet,
Jinja2 with autoescape; the charts, Markup, are iolab.report.svg's, which escapes every text it writes),
inline: the page loads nothing.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from pathlib import Path

from markupsafe import Markup

import iolab
from iolab.report import html as report_html
from iolab.report import svg
from iolab.report.history_series import Series
from iolab.units import printable

FILE = "history.html"
TEMPLATE = "history.html.j2"


def _epoch(when: str) -> float:
    return dt.datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() if when else 0.0


def build(found: list[Series], rules: list[str], results: Path) -> str:
    backends = list(dict.fromkeys(s.backend for s in found))
    palette = svg.colors(backends)
    charts: dict[tuple[str, str, str], list[Series]] = defaultdict(list)
    for s in found:
        charts[(s.metric, s.workload, s.setting_label)].append(s)
    figures, regressions = [], []
    for (metric, workload, setting), lines in charts.items():
        drawn = {
            s.backend: [
                svg.TimePoint(
                    _epoch(p.when),
                    p.median,
                    min(p.values),
                    max(p.values),
                    f"{p.store}, n={len(p.values)}" + (f", {p.change * 100:+.1f}%" if p.change is not None else ""),
                    bool(p.regressions),
                )
                for p in s.points
            ]
            for s in lines
        }
        title = f"{metric} · {workload}{' ' + setting if setting else ''}"
        chart = svg.time_chart(drawn, lines[0].unit, {b: palette[b] for b in drawn}, label=title)
        figures.append({"title": title, "chart": Markup(chart), "rows": _rows(lines)})
        regressions += [
            f"{s.title}: {p.store} ({p.when[:10]}) against the point before: "
            f"{p.change * 100:+.1f}% breaks {', '.join(p.regressions)}"
            if p.change is not None
            else f"{s.title}: {p.store} ({p.when[:10]}) lost the figure: breaks {', '.join(p.regressions)}"
            for s in lines
            for p in s.points
            if p.regressions
        ]
    campaigns = sorted({(p.when, p.store) for s in found for p in s.points})
    return (
        report_html._templates()
        .get_template(TEMPLATE)
        .render(
            title=f"history of {results}",
            backends=backends,
            palette=palette,
            figures=figures,
            regressions=regressions,
            rules=rules,
            campaigns=len(campaigns),
            span=f"{campaigns[0][0][:10]} → {campaigns[-1][0][:10]}" if campaigns else "—",
            version=iolab.__version__,
            generated=f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M}",
        )
    )


def _rows(lines: list[Series]) -> list[list[str]]:
    return [[s.backend, *p.cells(s.unit)] for s in lines for p in s.points]


def write(found: list[Series], rules: list[str], results: Path) -> Path:
    """The page, written as results/history.html (names' control characters written out); its path."""
    path = Path(results) / FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(printable(build(found, rules, results)), encoding="utf-8")
    tmp.replace(path)
    return path
