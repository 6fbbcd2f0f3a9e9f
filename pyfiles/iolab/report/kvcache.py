"""The KV-cache workload in `./lab report`: the search's answer beside accelerators fed, then each point's trials.

    verdict_rows(samples)       one row per (workload, backend) with a `kv_served` answer (iolab.run.kvcache_search)
    verdict_table(samples)      what limited each search, then the answer with its interval and the figures at it
    page(samples)               the same for the HTML page (report_html, templates/report.html.j2)
    trial_rows(samples)         per point and backend: its trials' read GiB/s, max-of-P95 read and tokens/s
    trials_table(samples)       the same as a table: noise shown, not hidden

MLPerf Storage's rules reduce an option's trials by the mean (read bandwidth and tokens/s) and by the
maximum (the latency figure: the most of every rank's P95 over every trial, rule 6.3.4); kv-cache.py's
own README reports 50–125 % variation from run to run and advises the median of three to five trials.
So each point shows its median and its range over the trials, the rules' mean beside them and how far
that mean sits from the median (in % of the median), and the rules' latency figure beside its median.
"""

from __future__ import annotations

import statistics
from typing import Any

from rich.console import Group

from iolab.measures import validity
from iolab.measures.samples import Sample
from iolab.report import footnotes
from iolab.report.layout import NUMBER, Column, Fitted
from iolab.report.tables import (
    DEFAULT_UNITS,
    LAB_SCALE,
    answer_cells,
    answer_flags,
    answers,
    answers_table,
    fed_label,
    limit_line,
    number,
    unit_scale,
)

METRIC = "kv_served"  # iolab.run.kvcache_search's answer
FIGURES = ("read_bw", "kv_read_p95_max", "tokens_per_s")


def verdict_rows(samples: list[Sample]) -> list[dict[str, Any]]:
    """Per (workload, backend), the latest `kv_served` for all hosts: the answer, its label (interval, flags),
    what limited it, and at that point the read B/s, tokens/s and max-of-P95 read with its range over probes."""
    rows = []
    for s, at, point in answers(samples, METRIC, "count"):
        meta = s.metadata
        rows.append(
            {
                "workload": s.workload,
                "backend": s.backend,
                "served": int(s.value),
                "label": fed_label(s.value, {**meta, "flags": []}, meta.get("per", "")),
                "flags": [footnotes.named(f) for f in meta.get("flags", [])],
                "limited_by": meta.get("limited_by"),
                "bound": meta.get("latency_bound"),
                "per": meta.get("per", ""),
                "read_bw": at.get("read_bw"),
                "tokens_per_s": at.get("tokens_per_s"),
                "p95": at.get("p95"),
                "p95_range": (min(point["p95"]), max(point["p95"]), len(point["p95"])) if point else None,
                "run_id": at.get("run_id", ""),
            }
        )
    return rows


def verdict_cells(rows: list[dict[str, Any]], units: str = DEFAULT_UNITS) -> tuple[list[str], list[list[str]]]:
    """The answers as text: the header and one row of cells per verdict_rows row."""
    factor, label = unit_scale("B/s", max((r["read_bw"] or 0.0 for r in rows), default=0.0), units)
    head = ["workload", "backend", "served (held – failed)", f"read_bw ({label}, all hosts)", "tokens/s"]
    head += ["max-of-P95 read, worst probe (ms)", "over the (n) probes (ms)"]
    cells = []
    for r in rows:
        low_high = r["p95_range"]
        cells.append(
            [
                *answer_cells(r, factor),
                f"{r['tokens_per_s']:.0f}" if r["tokens_per_s"] is not None else "—",
                f"{r['p95'] * 1000:.1f}" if r["p95"] is not None else "—",
                f"{low_high[0] * 1000:.1f}–{low_high[1] * 1000:.1f} ({low_high[2]})" if low_high else "—",
            ]
        )
    return head, cells


def _title(rows: list[dict[str, Any]]) -> str:
    bound = rows[0]["bound"] * 1000 if rows[0]["bound"] is not None else float("nan")
    return f"KV cache: the most {rows[0]['per']} each backend serves with the max-of-P95 read ≤ {bound:g} ms"


def verdict_table(samples: list[Sample], units: str = DEFAULT_UNITS) -> Group | None:
    """What limited each backend's search, then its answer with the figures at it; None without a search."""
    rows = verdict_rows(samples)
    if not rows:
        return None
    return answers_table(_title(rows), rows, verdict_cells(rows, units), validity.assess(samples), "kv-cache")


def page(samples: list[Sample], units: str = DEFAULT_UNITS) -> dict[str, Any] | None:
    """The HTML page's section of the answers (templates/report.html.j2), after accelerators fed."""
    rows = verdict_rows(samples)
    if not rows:
        return None
    verdicts = validity.assess(samples)
    head, cells = verdict_cells(rows, units)
    notes = footnotes.Footnotes("kv-cache")
    return {
        "title": _title(rows),
        "head": head,
        "limits": [(limit_line(r), (r["limited_by"] or {}).get("side") == "client") for r in rows],
        "rows": [
            {"backend": r["backend"], "cells": c, "cites": notes.flags(answer_flags(r, verdicts))}
            for r, c in zip(rows, cells, strict=True)
        ],
        "notes": notes.items(),
        "note": LAB_SCALE,
    }


def trial_rows(samples: list[Sample]) -> list[dict[str, Any]]:
    """Per (workload, setting, backend) of the KV-cache runs: each figure's trials (host "*"), median, range, the
    rules' reduction (the mean; the most for the latency) and how far the rules' mean read sits from the median."""
    kv_runs = {s.run_id for s in samples if s.metric == "kv_read_p95_max"}
    groups = [g for g in validity.groups([s for s in samples if s.run_id in kv_runs]) if g.metric in FIGURES]
    labels = validity.setting_labels((g.workload, g.setting) for g in groups)
    points: dict[tuple[str, str, str], dict[str, Any]] = {}
    for g in groups:
        row = points.setdefault(
            (g.workload, g.setting, g.backend),
            {"workload": g.workload, "setting": labels[(g.workload, g.setting)], "backend": g.backend},
        )
        rules = max(g.values) if g.metric == "kv_read_p95_max" else statistics.fmean(g.values)
        row[g.metric] = {"trials": list(g.values), "median": g.median, "min": min(g.values), "max": max(g.values)}
        row[g.metric]["rules"] = rules
        row["trials"] = len(g.values)
    for row in points.values():
        read = row.get("read_bw")
        row["mean_from_median"] = (read["rules"] - read["median"]) / read["median"] if read and read["median"] else None
    return list(points.values())


def trials_table(samples: list[Sample], units: str = DEFAULT_UNITS) -> Fitted | None:
    """The KV-cache points' trials: median over lowest–highest, the rules' figure and its distance from the median;
    a line per point and backend, its row under it."""
    rows = trial_rows(samples)
    if not rows:
        return None
    factor, label = unit_scale("B/s", max((r["read_bw"]["max"] for r in rows if "read_bw" in r), default=0.0), units)
    out = Fitted(
        [Column("trials", NUMBER), Column(f"read ({label})", NUMBER)]
        + [Column(f"rules' mean ({label})", NUMBER), Column("Δ", NUMBER), Column("max-of-P95 read (ms)", NUMBER)]
        + [Column("rules' (ms)", NUMBER), Column("tokens/s", NUMBER)],
        title="KV cache: every trial's figures (the rules reduce trials by their mean; latency by the most)",
        after=[
            "median, under it [lowest–highest] over the trials; rules: the mean of the trials (read, tokens/s) or "
            "the most (max-of-P95); Δ: how far the rules' mean read sits from the median"
        ],
    )

    def cell(figure: dict[str, Any] | None, scale: float) -> str:
        if not figure:
            return "—"
        return f"{number(figure['median'] / scale)}\n[{number(figure['min'] / scale)}–{number(figure['max'] / scale)}]"

    for r in rows:
        read, p95 = r.get("read_bw"), r.get("kv_read_p95_max")
        delta = r["mean_from_median"]
        out.add_row(
            str(r["trials"]),
            cell(read, factor),
            number(read["rules"] / factor) if read else "—",
            f"{delta * 100:+.1f} %" if delta is not None else "—",
            cell(p95, 1e-3),
            number(p95["rules"] * 1000) if p95 else "—",
            cell(r.get("tokens_per_s"), 1.0),
            group=f"{r['workload']} {r['setting']}".strip() + f" · {r['backend']}",
        )
    return out


# What `./lab report` prints after accelerators fed (iolab.report.tables.print_report's leads).
LEADS = (verdict_table, trials_table)
