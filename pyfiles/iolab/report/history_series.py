"""report.history's series: a metric per backend, workload and setting over every campaign, from the index.

    ./lab report.history [--metric read_bw] [--backend B] [--workload W] [--format table|html|json]

A *series* is one (backend, workload, setting, metric label), a *point* one campaign's repeats of it
(a store moved aside is a campaign of its own history), at the time the campaign started: the median
over its repetitions, with min–max and the interquartile range, and n. Repeats are grouped as every
report groups them (iolab.measures.validity.groups: the aggregate over hosts where there is one). Each point
is judged against the series' point before it by report.compare's rules (`iolab.report.compare.judge`):
the rules given, or by default a 5 % rule per figure of merit in the direction the catalogue says
is better (`read_bw >= -5%`, `read_clat_p99 <= +5%`, the agreement MLPerf Storage asks of repeats).
A point whose runs carry a recorded flag (potential_caching, …) is marked.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy import select

from iolab.errors import UserError
from iolab.measures import metrics, validity
from iolab.parsers import LOWER
from iolab.report import compare
from iolab.report.layout import NUMBER, TEXT, Column, Fitted
from iolab.report.tables import number, unit_scale, with_unit
from iolab.results import index as results_index
from iolab.results import query as results_query
from iolab.results.schema import campaigns, samples
from iolab.units import human


class NothingYet(UserError):
    """No sample of the metrics asked for (or none at all yet)."""


@dataclasses.dataclass
class Point:
    campaign: str  # the campaign's name
    store: str  # its directory (quick, quick.20261121T060000Z)
    when: str  # the campaign's start, ISO 8601 UTC
    values: list[float]
    flagged: bool = False  # a run of it carries a recorded flag
    change: float | None = None  # against the point before: B/A − 1 (ratio of geometric means)
    regressions: list[str] = dataclasses.field(default_factory=list)  # the rules it breaks, as rule texts

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def cells(self, unit: str, scale: float | None = None) -> list[str]:
        """The point as the table and the page show it: start, store, median, min – max, IQR, n, change, rules;
        its figures in human units (the page), or divided by `scale` (the terminal: the unit in the series' line).
        """
        low, high = self.iqr

        def figure(value: float) -> str:
            return human(value, unit) if scale is None else number(value / scale)

        return [
            self.when[:16].replace("T", " "),
            self.store,
            figure(self.median),
            f"{figure(min(self.values))} – {figure(max(self.values))}",
            f"{figure(low)} – {figure(high)}",
            str(len(self.values)),
            "—" if self.change is None else f"{self.change * 100:+.1f}%",
            ("✗ " + "; ".join(self.regressions) if self.regressions else "") + (" ⚑" if self.flagged else ""),
        ]

    @property
    def iqr(self) -> tuple[float, float]:
        if len(self.values) < 2:
            return self.values[0], self.values[0]
        low, _, high = statistics.quantiles(self.values, n=4, method="inclusive")
        return low, high


@dataclasses.dataclass
class Series:
    backend: str
    workload: str
    setting: str  # JSON of the swept parameters
    setting_label: str  # 'iodepth=16': what varies between the workload's settings
    metric: str  # the label: read_bw, cpu_cores{mode=user}
    unit: str
    points: list[Point] = dataclasses.field(default_factory=list)

    @property
    def title(self) -> str:
        return (
            f"{self.metric} · {self.workload}{' ' + self.setting_label if self.setting_label else ''} · {self.backend}"
        )


def default_rules(chosen: list[str]) -> list[compare.Rule]:
    """A 5 % rule per metric, in the direction the catalogue says is better."""
    limit = f"{validity.AGREEMENT:.0%}"
    return [
        compare.parse_rule(f"{m} <= +{limit}" if metrics.of(m).better == LOWER else f"{m} >= -{limit}") for m in chosen
    ]


def build(
    results: Path,
    chosen: list[str] | None = None,
    backend: str | None = None,
    workload: str | None = None,
    rules: list[compare.Rule] | None = None,
) -> list[Series]:
    """Every series of the `chosen` metrics (default: the figures of merit) over all campaigns, oldest first."""
    chosen = chosen or sorted(validity.MERIT_METRICS, key=metrics.rank)
    eng = results_index.open_index(results)
    with eng.connect() as conn:
        stores = {r.campaign_id: r for r in conn.execute(select(campaigns))}
        query = select(samples)
        if backend:
            query = query.where(samples.c.backend == backend)
        if workload:
            query = query.where(samples.c.workload == workload)
        rows = list(conn.execute(query.where(samples.c.metric.in_(chosen))))
    if not rows:
        raise NothingYet(_nothing(results, chosen, backend, workload))
    by_campaign: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        by_campaign[row.campaign_id].append(row)
    found: dict[tuple[str, str, str, str], Series] = {}
    order = sorted(by_campaign, key=lambda c: (stores[c].started or "", stores[c].store))
    for campaign_id in order:
        _add_points(found, stores[campaign_id], by_campaign[campaign_id], chosen)
    labels = validity.setting_labels((s.workload, s.setting) for s in found.values())
    for s in found.values():
        s.setting_label = labels[(s.workload, s.setting)]
        _judge(s, rules if rules is not None else default_rules(chosen))
    return sorted(
        found.values(),
        key=lambda s: (metrics.rank(s.metric), s.workload, validity.setting_order(s.setting), s.backend),
    )


def _add_points(found: dict, store: Any, rows: list[Any], chosen: list[str]) -> None:
    """One point per series of a campaign's samples of the chosen metrics (their params make the runs' settings;
    metadata left out)."""
    flagged = {r.run_id for r in rows if r.flags != "[]"}
    batch = results_query.to_samples(rows, {store.campaign_id: store.name}, with_metadata=False)
    for g in validity.groups(batch):
        if validity.base_metric(g.metric) not in chosen:
            continue
        key = (g.backend, g.workload, g.setting, g.metric)
        series = found.setdefault(key, Series(g.backend, g.workload, g.setting, "", g.metric, g.unit))
        point = Point(store.name, store.store, store.started or "", g.values, bool(flagged & set(g.run_ids)))
        series.points.append(point)


def _judge(series: Series, rules: list[compare.Rule]) -> None:
    for before, point in zip(series.points, series.points[1:], strict=False):
        ratio, broken = compare.judge(series.metric, before.values, point.values, rules, level=None)
        point.change = ratio.change if ratio else None
        point.regressions = [r.text for r in broken]


def _nothing(results: Path, chosen: list[str], backend: str | None, workload: str | None) -> str:
    narrowed = "".join(f" {k} {v!r}" for k, v in (("on backend", backend), ("of workload", workload)) if v)
    return (
        f"no samples of {', '.join(chosen)}{narrowed} in the results under {results}; "
        'run a campaign first, or name another --metric (`./lab results.query "SELECT DISTINCT metric FROM samples"`)'
    )


def to_json(found: list[Series]) -> str:
    return json.dumps(
        [
            {
                "backend": s.backend,
                "workload": s.workload,
                "setting": json.loads(s.setting),
                "setting_label": s.setting_label,
                "metric": s.metric,
                "unit": s.unit,
                "points": [
                    {
                        "campaign": p.campaign,
                        "store": p.store,
                        "when": p.when,
                        "median": p.median,
                        "min": min(p.values),
                        "max": max(p.values),
                        "iqr": list(p.iqr),
                        "n": len(p.values),
                        "values": p.values,
                        "flagged": p.flagged,
                        "change": p.change,
                        "regressions": p.regressions,
                    }
                    for p in s.points
                ],
            }
            for s in found
        ],
        indent=1,
    )


def run(
    results: Path,
    chosen: list[str],
    backend: str | None,
    workload: str | None,
    rule_texts: list[str],
    rules_file: str | None,
) -> tuple[list[Series], list[str]]:
    """What report.history draws: the series (none yet: []) and the texts of the rules that judged them."""
    given = [compare.parse_rule(r) for r in rule_texts] + (compare.load_rules(rules_file) if rules_file else [])
    rules = given or default_rules(chosen or sorted(validity.MERIT_METRICS, key=metrics.rank))
    try:
        found = build(results, chosen or None, backend, workload, rules)
    except NothingYet:
        if chosen or backend or workload:
            raise
        return [], [r.text for r in rules]
    return found, [r.text for r in rules if any(r.matches(s.metric) for s in found)]


def table(found: list[Series], rules: list[str]) -> Fitted | str:
    """A line per series (its metric and unit, point, backend), then a row per point: its store and start, median,
    min–max, IQR and n, the change, the rules broken."""
    if not found:
        return "no figure of merit stored yet: run a campaign, then report.history draws each over time"
    out = Fitted(
        [Column("store, start (UTC)"), Column("median", NUMBER), Column("min – max", TEXT), Column("IQR", TEXT)]
        + [Column("n", NUMBER), Column("change", NUMBER), Column("rules broken", TEXT)],
        title=f"each figure over time: a campaign's median over its repetitions; rules: {', '.join(rules)}",
        after=["change: against the point before (ratio of geometric means); ✗ breaks a rule; ⚑ a run is flagged"],
    )
    for s in found:
        factor, label = unit_scale(s.unit, max(p.median for p in s.points))
        title = f"{with_unit(s.metric, label)} · {s.workload}{' ' + s.setting_label if s.setting_label else ''}"
        for p in s.points:
            when, store, *figures = p.cells(s.unit, factor)
            out.add_row(f"{store}\n{when}", *figures, group=f"{title} · {s.backend}")
    return out
