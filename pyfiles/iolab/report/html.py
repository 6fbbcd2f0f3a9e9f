"""The campaign as one self-contained HTML page: who wins, plots, figures, flags, provenance, telemetry.

    ./lab report --format html        → results/<campaign>/report.html
    ./lab report --format html --units si   byte figures in GB/s, GB (default iec: GiB/s, GiB)

Nothing on the page is fetched: the CSS is inline and the plots are inline SVG
drawn by `iolab.report.svg`, so the file can be mailed, archived or opened offline.
Hovering a bar or a point shows its figures (SVG <title>, no script). Each table row
and each chart's axis names its unit (report.unit_scale); cells are numbers in it.

The markup is Jinja2 templates, templates/report.html.j2 (with macros.html.j2 and
report.css.j2), rendered with autoescape on; this module gives them each section's
context from the report model (report, validity, history): names as they are,
figures scaled and formatted, and the charts as Markup.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from iolab import __version__
from iolab.measures import metrics, validity, who_wins
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample
from iolab.parsers import BARS, PERCENTILES
from iolab.report import faults as report_faults
from iolab.report import footnotes, history, svg
from iolab.report import kvcache as report_kvcache
from iolab.report import replay as report_replay
from iolab.report import tables as report
from iolab.report import telemetry as report_telemetry
from iolab.report.tables import BYTE_UNITS, DEFAULT_UNITS, number, unit_scale, with_unit
from iolab.store import ceph
from iolab.units import printable
from iolab.workloads.mlperf import AU_THRESHOLD, RAM_MULTIPLE

FILE = "report.html"
TEMPLATE = "report.html.j2"  # in templates/, installed with the package
TELEMETRY_RUNS = 8  # runs whose telemetry is drawn; the rest are listed


def write(store: ResultStore, units: str = DEFAULT_UNITS) -> Path:
    """Build the page for `store` and write it beside the samples (names' control characters written out,
    as in every report: the template escapes only markup); return its path."""
    path = store.dir / FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(printable(build(store, units)), encoding="utf-8")
    tmp.replace(path)
    return path


def build(store: ResultStore, units: str = DEFAULT_UNITS) -> str:
    samples = store.samples()
    groups = validity.groups(report.figures(samples))
    rows = who_wins.summarize(report.figures(samples), groups)
    verdicts = validity.assess(samples, groups)
    backends = list(dict.fromkeys(s.backend for s in samples))
    palette = svg.colors(backends)
    page = _Page(store, samples, rows, verdicts, backends, palette, units)
    template = _templates().get_template(TEMPLATE)
    return template.render(
        title=store.dir.name,
        backends=backends,
        palette=palette,
        header=page.header(),
        verdict=page.verdict(),
        kv_cache=report_kvcache.page(samples, units),  # the KV-cache search's answers
        replay=report_replay.answers(samples, units),  # each replayed trace's answer per backend
        winners=page.winners(),
        throughput=page.throughput(),
        latency=page.latency(),
        accelerators=page.accelerators(),
        per_backend=page.per_backend(),
        faults=report_faults.section(store, samples, units, in_units),
        flags=page.flags(),
        provenance=page.provenance(),
        telemetry=page.telemetry(),
        version=__version__,
        generated=f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M}",
        samples_path=str(store.samples_path),
    )


@functools.cache
def _templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("iolab.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _chart(svg_text: str) -> Markup:
    """A chart from iolab.report.svg as markup for the page: svg.py escapes every name, label and hover text it
    writes, and the rest is numbers and the palette's colours."""
    return Markup(svg_text)


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value / factor


def in_units(unit: str, top: float, units: str) -> tuple[float, str]:
    """(divisor, unit) for a chart of byte figures in the chosen system, or of clocks (MHz, GHz); other
    units are left to the chart."""
    return unit_scale(unit, top, units) if unit in BYTE_UNITS or unit == "Hz" else (1.0, unit)


class _Page:
    """Each section's context for the template: figures already scaled and formatted, names as they are
    (the template escapes them); None for a section the campaign has nothing for."""

    def __init__(
        self,
        store: ResultStore,
        samples: list[Sample],
        rows: list[dict],
        verdicts: validity.Verdicts,
        backends: list[str],
        palette: dict[str, str],
        units: str = DEFAULT_UNITS,
    ):
        self.store, self.samples, self.rows, self.verdicts = store, samples, rows, verdicts
        self.backends, self.palette, self.units = backends, palette, units
        self.scales = report.row_scales(rows, units)
        self.workloads = list(dict.fromkeys(s.workload for s in samples))

    def points(self, metric_filter) -> list[tuple[str, str, str]]:
        """(workload, setting, label) of the rows whose metric passes the filter, in campaign order."""
        seen: dict[Any, Any] = {}
        for r in self.rows:
            if metric_filter(r["metric"]):
                seen.setdefault((r["workload"], r["setting"]), report.point_label(r["workload"], r["setting_label"]))
        return sorted(
            ((w, s, label) for (w, s), label in seen.items()),
            key=lambda p: (self.workloads.index(p[0]), validity.setting_order(p[1])),
        )

    def row(self, workload: str, setting: str, metric: str, backend: str) -> dict | None:
        return self._index.get((workload, setting, metric, backend))

    @functools.cached_property
    def _index(self) -> dict[tuple, dict]:
        return {(r["workload"], r["setting"], r["metric"], r["backend"]): r for r in self.rows}

    # --- sections ---------------------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        entry = history.entry(self.store)
        runs = sorted({s.run_id for s in self.samples})
        counts: dict[str, int] = defaultdict(int)
        for r in runs:
            for name in dict.fromkeys(footnotes.flag_named(f)[0] for f in self.verdicts.of(r)):
                counts[name] += 1
        return {
            "entry": entry,
            "ended": entry.last[:16].replace("T", " "),
            "runs": len(runs),
            "comparable": sum(1 for r in runs if self.verdicts.valid(r)),
            "flagged": ", ".join(f"{n} {name}" for name, n in counts.items()),
        }

    def verdict(self) -> dict[str, Any] | None:
        """The campaign's answer first: accelerators fed per workload and backend (report.verdict_rows); each
        flag a name in its cell and a note under the table (the answer's own, then its run's)."""
        rows = report.verdict_rows(self.samples)
        if not rows:
            return None
        head, cells = report.verdict_cells(rows, self.units)
        notes = footnotes.Footnotes("verdict")
        return {
            "threshold": f"{rows[0]['threshold']:g}",
            "head": head,
            "limits": [(report.limit_line(r), (r["limited_by"] or {}).get("side") == "client") for r in rows],
            "rows": [
                {"backend": r["backend"], "cells": c, "cites": notes.flags(report.answer_flags(r, self.verdicts))}
                for r, c in zip(rows, cells, strict=True)
            ],
            "notes": notes.items(),
            "note": report.LAB_SCALE,
        }

    def winners(self) -> dict[str, Any]:
        """Who wins each point and metric; no rows with one backend only."""
        found = who_wins.winners(self.rows)
        left_out = len(who_wins.contests(self.rows)) - len(found)
        tally: dict[str, int] = defaultdict(int)
        for w in found:
            tally[w["winner"]] += 1
        rows = []
        for w in found:
            factor, unit = unit_scale(w["unit"], max(w["best"], w["second"]), self.units)
            rows.append(
                {
                    "point": report.point_label(w["workload"], w["setting_label"]),
                    "metric": with_unit(w["metric"], unit),
                    "winner": w["winner"],
                    "flagged": report.run_flagged(self.verdicts, w["run_ids"]),
                    "margin": w["margin"],
                    "best": number(w["best"] / factor),
                    "runner_up": w["runner_up"],
                    "second": number(w["second"] / factor),
                    "sure": w["sure"],
                }
            )
        return {"tally": sorted(tally.items(), key=lambda kv: -kv[1]), "rows": rows, "left_out": left_out}

    def _values(self, cells: list[tuple[str, str, str, str]]) -> tuple[dict[tuple[str, str], svg.Bar], str]:
        """{(category, backend): its bar} of the rows at each (category, workload, setting, metric); their unit."""
        values, unit = {}, ""
        for category, workload, setting, metric in cells:
            for b in self.backends:
                r = self.row(workload, setting, metric, b)
                if r:
                    unit = r["unit"]
                    values[(category, b)] = svg.Bar(r["median"], r["min"], r["max"], f"n={r['n']}")
        return values, unit

    def _bars(self, metric: str, points: list[tuple[str, str, str]]) -> Markup:
        values, unit = self._values([(label, workload, setting, metric) for workload, setting, label in points])
        factor, unit = in_units(unit, max((v.high or v.value for v in values.values()), default=1.0), self.units)
        values = {
            k: svg.Bar(v.value / factor, _scaled(v.low, factor), _scaled(v.high, factor), v.note)
            for k, v in values.items()
        }
        return _chart(
            svg.bar_chart(
                [p[2] for p in points],
                self.backends,
                values,
                unit,
                self.palette,
                label=f"{metric} per workload and backend",
            )
        )

    def throughput(self) -> list[dict[str, Any]]:
        figures = []
        for metric in (m for m in metrics.ordered("table") if metrics.of(m).chart == BARS):
            points = self.points(lambda m, metric=metric: m == metric)
            if points:
                figures.append({"chart": self._bars(metric, points), "metric": metric})
        return figures

    def latency(self) -> list[dict[str, Any]]:
        figures = []
        charted = [n for n, m in metrics.catalogue().items() if m.chart == PERCENTILES]  # read_clat_p99, ...
        for direction in dict.fromkeys(n.split("_", 1)[0] for n in charted):
            names = [n for n in charted if n.startswith(f"{direction}_")]
            percentiles = [n.rsplit("_", 1)[1] for n in names]
            for workload, setting, label in self.points(lambda m, names=names: m in names):
                values, unit = self._values([(n.rsplit("_", 1)[1], workload, setting, n) for n in names])
                chart = svg.bar_chart(
                    percentiles,
                    self.backends,
                    values,
                    unit,
                    self.palette,
                    log=True,
                    label=f"{direction} latency percentiles of {label}",
                    min_width=380,
                )
                figures.append({"chart": _chart(chart), "label": label, "direction": direction})
        return figures

    def accelerators(self) -> dict[str, Any] | None:
        """AU (the repeats' median) against the number of emulated accelerators (params.accelerators; a search's
        probes run as many epochs as each N needs), per workload and backend; the most N whose every repeat held."""
        curves: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
        thresholds: dict[tuple[str, str], float] = {}
        lowest: dict[tuple[tuple[str, str], str, float], float] = {}
        for r in self.rows:
            if r["metric"] != "au":
                continue
            setting = json.loads(r["setting"])
            count = setting.pop("accelerators", None)
            setting.pop("epochs", None)
            if count is None:
                continue
            key = (r["workload"], json.dumps(setting, sort_keys=True))
            lowest[(key, r["backend"], float(count))] = r["min"]
            thresholds[key] = float(setting.get("au_threshold", AU_THRESHOLD))
            curves[key][r["backend"]].append((float(count), r["median"]))
        if not curves:
            return None
        labels = validity.setting_labels(curves)
        figures, fed = [], []
        for key, lines in curves.items():
            threshold = thresholds[key]
            chart = svg.line_chart(
                lines,
                "%",
                "emulated accelerators per host",
                self.palette,
                threshold=(threshold, f"AU threshold {threshold:g}%"),
                y_max=100,
                label=f"accelerator utilization of {key[0]}",
                x_integer=True,
            )
            label = report.point_label(key[0], labels[key])
            figures.append({"chart": _chart(chart), "label": label})
            for backend, line in lines.items():
                ok = [int(x) for x, _ in line if lowest[(key, backend, x)] >= threshold]
                fed.append(
                    {
                        "label": label,
                        "backend": backend,
                        "most": max(ok) if ok else "none",
                        "threshold": f"{threshold:g}",
                    }
                )
        return {"figures": figures, "fed": fed}

    def per_backend(self) -> list[dict[str, Any]]:
        """Per backend, its figures: those of the tables (the catalogue's `table`, `main`), then the rest (`extra`)."""
        parts = []
        for b in self.backends:
            main: list[dict[str, Any]] = []
            extra: list[dict[str, Any]] = []
            mine = sorted(
                (r for r in self.rows if r["backend"] == b),
                key=lambda r: (
                    self.workloads.index(r["workload"]),
                    validity.setting_order(r["setting"]),  # by value: 1, 2, 4, 8, 16 accelerators
                    metrics.rank(r["metric"]),
                ),
            )
            shown = None
            for r in mine:
                point = report.point_label(r["workload"], r["setting_label"])
                factor, unit = self.scales[(r["workload"], r["setting_label"], r["metric"])]
                cells = {
                    "point": "" if point == shown else point,  # a point's name on its first row only
                    "metric": with_unit(r["metric"], unit),
                    "median": number(r["median"] / factor),
                    "flagged": report.run_flagged(self.verdicts, r["run_ids"]),
                    "spread": f"±{r['spread'] * 100:.1f}%" if r["n"] > 1 else "—",
                    "disagree": r["n"] > 1 and not r["agree"],
                    "min": number(r["min"] / factor),
                    "max": number(r["max"] / factor),
                    "n": r["n"],
                }
                shown = point
                (main if metrics.of(validity.base_metric(r["metric"])).table is not None else extra).append(cells)
            parts.append({"backend": b, "main": main, "extra": extra})
        return parts

    def flags(self) -> dict[str, Any]:
        """The flags of the runs (report.flag_rows; each reason a note under the table), the checks not applied
        and on how many runs, the rules."""
        notes: dict[str, int] = defaultdict(int)
        for run_notes in self.verdicts.notes.values():
            for note in dict.fromkeys(run_notes):
                notes[note] += 1
        reasons = footnotes.Footnotes("flags")
        rows = [
            {**r, "cite": reasons.flags([(r["flag"], r["reason"])])[0]}
            for r in report.flag_rows(self.samples, self.verdicts)
        ]
        return {
            "rows": rows,
            "reasons": reasons.items(),
            "notes": list(notes.items()),
            "ram_multiple": RAM_MULTIPLE,
            "agreement": f"{validity.AGREEMENT:.0%}",
        }

    def provenance(self) -> dict[str, Any] | None:
        """What each host reported (one row per fact, the values each host gave) and what each backend mounted."""
        per_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
        mounts: dict[tuple[str, str], set[str]] = defaultdict(set)
        for s in self.samples:
            if s.host == AGGREGATE_HOST:
                continue
            per_host[s.host].append(s.metadata)
            facts = s.metadata.get("host") or {}
            mount, block = facts.get("mount") or {}, facts.get("block") or {}
            if mount:
                text = f"{mount.get('source')} on {mount.get('target')} ({mount.get('fstype')}, {mount.get('options')})"
                if block:
                    text += (
                        f"; device {block.get('device')}, read-ahead {block.get('read_ahead_kb')} KiB, "
                        f"scheduler {block.get('scheduler')}"
                    )
                mounts[(s.backend, s.host)].add(text)
        if not per_host:
            return None
        fields = [
            ("hostname", lambda m: (m.get("host") or {}).get("hostname")),
            ("OS", lambda m: (m.get("host") or {}).get("os")),
            ("kernel", lambda m: (m.get("host") or {}).get("kernel")),
            ("CPU", lambda m: (m.get("host") or {}).get("cpu_model")),
            ("cores", lambda m: (m.get("host") or {}).get("cpu_count")),
            ("NUMA nodes", lambda m: (m.get("host") or {}).get("numa_nodes")),
            ("memory", lambda m: self._size((m.get("host") or {}).get("memory_bytes"))),
            (
                "GPUs",
                lambda m: ", ".join(g.get("model", "?") for g in (m.get("host") or {}).get("gpus") or []) or "none",
            ),
            ("python", lambda m: (m.get("host") or {}).get("python")),
            ("iolab", lambda m: (m.get("host") or {}).get("iolab_version")),
            ("fio", lambda m: m.get("fio_version")),
            ("cache state", ceph.cache_state),
        ]
        hosts = sorted(per_host)
        rows, differ = [], []
        for name, get in fields:
            values = {
                h: list(dict.fromkeys(str(v) for v in (get(m) for m in per_host[h]) if v is not None)) for h in hosts
            }
            if not any(values.values()):
                continue
            across = len({tuple(v) for v in values.values()}) > 1
            within = any(len(v) > 1 for v in values.values())
            if across or within:
                differ.append(name)
            # cells: per host, the values it reported (more than one: they changed between runs)
            rows.append({"name": name, "differs": across or within, "cells": [values[h] for h in hosts]})
        return {
            "hosts": hosts,
            "rows": rows,
            "differ": differ,
            "mounts": [
                {"backend": b, "host": h, "mounts": sorted(texts)}
                for (b, h), texts in sorted(mounts.items(), key=lambda kv: (self.backends.index(kv[0][0]), kv[0][1]))
            ],
        }

    def _size(self, value: Any) -> str | None:
        if not value:
            return None
        factor, unit = unit_scale("B", float(value), self.units)
        return f"{number(float(value) / factor)} {unit}"

    def telemetry(self) -> dict[str, Any] | None:
        """The charts of the first TELEMETRY_RUNS runs (per host) that kept telemetry; how many more did."""
        found = []
        for run_id in dict.fromkeys(s.run_id for s in self.samples):
            raw = self.store.raw_dir(run_id)
            for host_dir in sorted(raw.glob(f"*/{report_telemetry.TELEMETRY_FILE}")) if raw.exists() else []:
                found.append((run_id, host_dir.parent))
        if not found:
            return None
        first = {s.run_id: s for s in reversed(self.samples)}
        runs = []
        for index, (run_id, host_dir) in enumerate(found[:TELEMETRY_RUNS]):
            series = report_telemetry.load_telemetry(host_dir)
            if not series:
                continue
            s = first[run_id]
            charts: list[dict[str, Any]] = []
            others: list[dict[str, Any]] = []
            for base, lines, unit in report_telemetry.telemetry_charts(series):
                top = max((abs(v) for points in lines.values() for _, v in points), default=1.0)
                factor, unit = in_units(unit, top, self.units)
                lines = {k: [(t, v / factor) for t, v in points] for k, points in lines.items()}
                chart = svg.line_chart(
                    lines,
                    unit,
                    "seconds into the run",
                    svg.colors(list(lines)),
                    x_min=0,
                    label=f"{base} over time",
                    width=440,
                    markers=False,
                )
                (charts if metrics.of(base).timeline is not None or len(charts) < 4 else others).append(
                    {"chart": _chart(chart), "name": base}
                )
            runs.append(
                {
                    "open": index == 0,
                    "workload": s.workload,
                    "backend": s.backend,
                    "repetition": s.repetition,
                    "host": host_dir.name,
                    "run_id": run_id,
                    "charts": charts,
                    "others": others,
                }
            )
        return {"runs": runs, "more": len(found) - TELEMETRY_RUNS, "lines": report_telemetry.TELEMETRY_LINES}


# --- telemetry ------------------------------------------------------------------------------------
