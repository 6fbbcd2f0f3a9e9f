"""Each faulted run on the report and the HTML page: its rate per host (and all hosts added up) over the run, the
faults' injections and heals marked on it, the cluster's degraded objects, and its figures beside them.

    for run in faulted(store, samples): ...     # the runs whose samples carry metadata.faults (iolab.store.record)
    table(store, samples, units)                # the terminal's table of them (rich), a sparkline of the rate
    section(store, samples, units, scale)       # the HTML page's section (templates/report.html.j2, #faults)

The series come from the runs' own files, read as the samples were made (raw/<run_id>/recorded.jsonl names the
run, so its tool's parser), the faults' record and the health polls from iolab.parsers.faults.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.text import Text

from iolab.campaign.model import Run
from iolab.measures import metrics
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample
from iolab.parsers import ParseError
from iolab.parsers import faults as fault_figures
from iolab.report import svg
from iolab.report.layout import NUMBER, Column, Fitted, width
from iolab.store.record import RECORDED
from iolab.units import human, printable

ALL = "all hosts"  # the line of the hosts added up
UNITS = "iec"  # byte figures in KiB, MiB (iolab.report.tables's default); "si": kB, MB
# Each figure's row: (metric, params.after, label), in the order they are shown.
ROWS = (
    ("*_baseline", None, "baseline (median before)"),
    ("*_degraded", None, "mean while degraded"),
    ("floor_pct", None, "floor, % of baseline"),
    ("time_to_90pct", "injection", "to 90 % after the injection"),
    ("time_to_90pct", "heal", "to 90 % after the heal"),
    ("time_to_99pct", "injection", "to 99 % after the injection"),
    ("time_to_99pct", "heal", "to 99 % after the heal"),
    ("client_errors", None, "errors the clients saw"),
    ("fault_au", None, "AU inside the fault window"),
    ("data_errors", None, "data set problems after"),
    ("time_to_health_ok", None, "cluster back to its health"),
    ("degraded_objects_peak", None, "degraded objects, peak"),
)
# A store made before 2026-11-29 calls floor_pct `dip`: read as the floor, so that its 0 never reads as "no dip"
# (`./lab results.reparse --write` stores it under its name)
FORMER = {"dip": "floor_pct"}
NOT_BACK = "not back by the end"  # a time to X % the series' end came before (iolab.parsers.faults.time_to)
SPARKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 100  # characters of the terminal's sparkline at most
GAP = 2  # columns between two of a table's (iolab.report.layout)


@dataclasses.dataclass
class Faulted:
    """One faulted run: what it was, its faults on its clock, its rate's series and its figures."""

    run_id: str
    backend: str
    workload: str
    repetition: int
    start_at: float | None
    events: list[dict[str, Any]]
    rate: str | None
    hosts: list[str]
    series: dict[str, list[tuple[float, float]]]  # host (or ALL) → (seconds since the common start, value)
    cluster: dict[str, list[tuple[float, float]]]  # Ceph's OSDs up and in, objects degraded: (s since the start, count)
    samples: list[Sample]

    def figure(self, metric: str, after: str | None, host: str) -> Sample | None:
        for s in self.samples:
            stored = FORMER.get(s.metric, s.metric)
            name = stored if not metric.startswith("*") else "*" + stored[len(self.rate or "") :]
            if name == metric and s.params.get("after") == after and s.host == host:
                return s
        return None

    def marks(self) -> list[tuple[float, str]]:
        """(seconds since the common start, label) of each injection and heal that took place."""
        return [
            (e["at_s"], f"{e.get('what')} {'healed' if e['type'] == 'heal' else 'injected'}")
            for e in self.events
            if e.get("type") in ("inject", "heal") and e.get("at_s") is not None and e.get("ok")
        ]

    def said(self) -> list[str]:
        """Each event in a few words, on the run's clock."""
        out = []
        for e in self.events:
            if e.get("type") in ("inject", "heal"):
                when = f"at {e['at_s']:.1f} s" if e.get("at_s") is not None else "by the teardown"
                late = f", {e['late_s']:.1f} s late" if (e.get("late_s") or 0) >= 0.05 else ""
                state = "ok" if e.get("ok") else f"FAILED: {e.get('detail')}"
                verb = "injected" if e["type"] == "inject" else "healed"
                out.append(f"{e.get('what')} {e.get('target', '')}".strip() + f" {verb} {when}{late}: {state}")
            elif e.get("type") == "never":
                out.append(f"fault {e.get('fault', '')}: not applied ({e.get('why')})")
        return out


def _run(raw: Path) -> Run | None:
    try:
        return Run.model_validate(json.loads((raw / RECORDED).read_text().splitlines()[-1])["run"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def _series(raw: Path, run: Run | None, hosts: list[str], rate: str | None) -> dict[str, list[tuple[float, float]]]:
    """Each host's series of the rate, from its files (the tool's parser), and ALL: their sum second by second."""
    if run is None or rate is None:
        return {}
    from iolab.kinds.registry import parser_for

    found = {}
    for host in hosts:
        try:
            points = parser_for(run.workload.tool)(raw / host).series.get(rate)
        except (ParseError, OSError, ValueError, KeyError):
            points = None
        if points:
            found[host] = fault_figures.completed(points)
    if len(found) > 1 and len(found) == len(hosts):
        found[ALL] = fault_figures.summed(list(found.values()))
    return found


def faulted(store: ResultStore, samples: list[Sample]) -> list[Faulted]:
    """The faulted runs of `samples`, in the order they were stored."""
    by_run: dict[str, list[Sample]] = {}
    for s in samples:
        if "faults" in s.metadata:
            by_run.setdefault(s.run_id, []).append(s)
    out = []
    for run_id, own in by_run.items():
        summary = own[0].metadata["faults"]
        baseline = next((s.metric for s in own if s.metric.endswith("_baseline")), None)
        rate = baseline.removesuffix("_baseline") if baseline else None
        hosts = sorted({s.host for s in own if s.host != AGGREGATE_HOST})
        raw = store.raw_dir(run_id)
        record = fault_figures.load(raw)
        start = summary.get("start_at")
        series = _series(raw, _run(raw), hosts, rate)
        polls = [h for h in (record.health if record else []) if "health" in h and start]
        cluster = {
            name: [(h["t"] - start, float(h.get(key) or 0)) for h in polls if h["t"] >= start]
            for name, key in (("OSDs up", "osds_up"), ("OSDs in", "osds_in"), ("objects degraded", "degraded_objects"))
        }
        out.append(
            Faulted(
                run_id=run_id,
                backend=own[0].backend,
                workload=own[0].workload,
                repetition=own[0].repetition,
                start_at=start,
                events=summary.get("events", []),
                rate=rate,
                hosts=hosts,
                series={k: [(t - start, v) for t, v in p] for k, p in series.items()} if start else {},
                # drawn only where the cluster felt it: OSDs that went down or out, objects degraded
                cluster=cluster if any(len({v for _, v in points}) > 1 for points in cluster.values()) else {},
                samples=own,
            )
        )
    return out


def _cell(sample: Sample | None, units: str) -> str:
    if sample is None:
        return "—"
    if sample.unit == "count":
        return f"{sample.value:,.0f}"
    return human(sample.value, sample.unit, si=units == "si")


def plain(text: str) -> Text:
    """A cell as plain text: never Rich markup, never a terminal control (as the report's own)."""
    return Text(printable(text))


def rows(run: Faulted, units: str = UNITS) -> tuple[list[str], list[list[str]]]:
    """The figures' table of a faulted run: (its columns: the hosts and, with several, all of them; its rows)."""
    columns = [*run.hosts, *([AGGREGATE_HOST] if len(run.hosts) > 1 else [])]

    def figure(metric: str, after: str | None, host: str) -> Sample | None:
        # One host: its column holds the figures of host "*" too (the cluster's health is the run's, not a host's)
        return run.figure(metric, after, host) or (
            run.figure(metric, after, AGGREGATE_HOST) if len(columns) == 1 else None
        )

    healed = any(e.get("type") == "heal" and e.get("by") == "schedule" and e.get("ok") for e in run.events)

    def cell(metric: str, after: str | None, host: str) -> str:
        found = figure(metric, after, host)
        # A time back to 90 or 99 % that is missing where the host felt the fault: its rate did not come back
        if found is None and after is not None and figure("floor_pct", None, host) is not None:
            return NOT_BACK if after == "injection" or healed else "—"
        return _cell(found, units)

    out = []
    for metric, after, label in ROWS:
        cells = [cell(metric, after, host) for host in columns]
        if any(cell != "—" for cell in cells):
            out.append([label, *cells])
    return ["all hosts" if c == AGGREGATE_HOST else c for c in columns], out


def spark(points: list[tuple[float, float]], marks: Sequence[tuple[float, str]] = (), width: int = SPARK_WIDTH) -> str:
    """The rate as one line of block characters, a second each (a longer run: each character the mean of as many
    seconds as keep it within `width`), and under it a ^ below each character a fault was injected or healed in."""
    step = max(1, math.ceil(len(points) / width))
    means = [statistics.fmean(v for _, v in points[i : i + step]) for i in range(0, len(points), step)]
    top = max(means, default=0.0) or 1.0
    line = "".join(SPARKS[min(len(SPARKS) - 1, int(v / top * len(SPARKS)))] for v in means)
    under = [" "] * len(means)
    for at, _ in marks:
        index = next((i for i, (t, _) in enumerate(points) if t - 1 < at <= t), None)
        if index is not None:
            under[index // step] = "^"
    return line + ("\n" + "".join(under).rstrip() if marks else "")


def table(store: ResultStore, samples: list[Sample], units: str = UNITS) -> Group | None:
    """The terminal's faulted runs: per run, its faults on its clock, its rate as a sparkline (a ^ under each
    second a fault was injected or healed in) and a table of its figures, a column per host."""
    runs = faulted(store, samples)
    if not runs:
        return None
    parts: list[Text | ByHosts] = [plain("Faulted runs: what the clients felt")]
    for run in runs:
        columns, figures = rows(run, units)
        line = run.series.get(ALL) or next(iter(run.series.values()), [])
        whose = "all hosts" if ALL in run.series else ", ".join(run.series) or "no host"
        parts.append(plain(f"{run.workload} on {run.backend}, rep {run.repetition} ({run.run_id})"))
        parts.append(plain("\n".join(f"  {said}" for said in run.said() or ["no fault applied"])))
        drawn = spark(line, run.marks())
        seconds = max(1, math.ceil(len(line) / SPARK_WIDTH))
        parts.append(plain(f"  {run.rate or 'no rate'} of {whose}, a character {seconds} s:"))
        parts.append(Text("\n".join(f"  {row}" for row in drawn.splitlines()), no_wrap=True, overflow="crop"))
        parts.append(ByHosts(columns, figures))
    return Group(*parts)


class ByHosts:
    """A faulted run's figures, a row per figure and a column per host, at the width they are printed at: where the
    hosts' columns do not fit beside the figures' names, as many tables as it takes, each with as many hosts as fit
    (a name or a figure is never cut: iolab.report.layout)."""

    def __init__(self, hosts: list[str], figures: list[list[str]]):
        self.hosts, self.figures = hosts, figures

    def chunks(self, room: int) -> list[list[int]]:
        """The hosts' indexes in the tables that fit `room` columns (one host a table at the least)."""
        used = names = max([width("figure"), *(width(row[0]) for row in self.figures)])
        out: list[list[int]] = [[]]
        for index, host in enumerate(self.hosts):
            wide = max([width(host), *(width(row[index + 1]) for row in self.figures)]) + GAP
            if out[-1] and used + wide > room:
                out.append([])
                used = names
            out[-1].append(index)
            used += wide
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for number, chunk in enumerate(self.chunks(options.max_width)):
            if number:
                yield Text("")
            table = Fitted([Column("figure"), *(Column(self.hosts[i], NUMBER) for i in chunk)])
            for row in self.figures:
                table.add_row(row[0], *(row[i + 1] for i in chunk))
            yield table


Scale = Callable[[str, float, str], tuple[float, str]]  # (unit, top, units) → (divisor, label): report_html.in_units


def section(store: ResultStore, samples: list[Sample], units: str, scale: Scale) -> list[dict[str, Any]] | None:
    """The HTML page's faulted runs: a chart of the rate with the faults marked, the cluster's side, the figures;
    `scale` writes a chart's byte figures in the page's units."""
    runs = faulted(store, samples)
    if not runs:
        return None
    out = []
    for run in runs:
        unit = metrics.of(run.rate).unit if run.rate else ""
        top = max((abs(v) for points in run.series.values() for _, v in points), default=1.0)
        factor, label = scale(unit, top, units)
        lines = {k: [(t, v / factor) for t, v in points] for k, points in run.series.items()}
        charts = []
        if lines:
            chart = svg.line_chart(
                lines,
                label,
                "seconds since the common start",
                svg.colors(list(lines)),
                label=f"{run.rate} over the run, faults marked",
                x_min=0,
                markers=False,
                marks=run.marks(),
            )
            charts.append({"chart": Markup(chart), "name": f"{run.rate} per host"})
        if run.cluster:
            healthy = run.figure("time_to_health_ok", None, AGGREGATE_HOST)
            first = min((at for at, text in run.marks() if text.endswith("injected")), default=None)
            back = [(first + healthy.value, "as healthy as before")] if healthy and first is not None else []
            chart = svg.line_chart(
                run.cluster,
                "count",
                "seconds since the common start",
                label="the Ceph cluster polled once a second, faults marked",
                x_min=0,
                markers=False,
                marks=[*run.marks(), *back],
            )
            charts.append({"chart": Markup(chart), "name": "Ceph: OSDs up and in, objects degraded"})
        columns, figures = rows(run, units)
        out.append(
            {
                "run_id": run.run_id,
                "workload": run.workload,
                "backend": run.backend,
                "repetition": run.repetition,
                "events": run.said(),
                "charts": charts,
                "columns": columns,
                "rows": figures,
            }
        )
    return out
