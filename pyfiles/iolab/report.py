"""Compare backends side by side: median and spread over repetitions, in human units.

    ./lab report                     the latest campaign as a table
    ./lab report --format csv        every sample, for a spreadsheet
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import defaultdict
from pathlib import Path

from rich.table import Table

from iolab.errors import UserError
from iolab.samples import AGGREGATE_HOST, ResultStore, Sample
from iolab.units import human

# Shown in the table, in this order; every metric is in the CSV and JSON exports.
TABLE_METRICS = ("read_bw", "write_bw", "read_iops", "write_iops", "samples_per_s", "au",
                 "read_clat_p50", "read_clat_p99", "read_clat_p999", "write_clat_p99")
AGREEMENT = 0.05  # repeats within 5% of their median agree (MLPerf Storage)


def find_store(results: Path, campaign: str | None) -> ResultStore:
    """The named campaign's store, or the one written to last."""
    if campaign:
        store = ResultStore(results, campaign)
        if not store.samples_path.exists():
            known = sorted(p.parent.name for p in results.glob("*/samples.jsonl"))
            raise UserError(f"no results for campaign {campaign!r} in {results}"
                            + (f" (campaigns with results: {', '.join(known)})" if known else
                               "; run `./lab bench.all` first"))
        return store
    stores = sorted(results.glob("*/samples.jsonl"), key=lambda p: p.stat().st_mtime)
    if not stores:
        raise UserError(f"no results in {results} yet; run `./lab bench.all` first")
    return ResultStore(results, stores[-1].parent.name)


def _setting(sample: Sample) -> str:
    """The swept parameters that tell two points of one workload apart."""
    keep = {k: v for k, v in sample.params.items() if k not in ("runtime", "ramp", "size")}
    return json.dumps(keep, sort_keys=True)


def summarize(samples: list[Sample]) -> list[dict]:
    """One row per (workload, setting, metric, backend): median, spread and agreement over repeats.

    The aggregate (host "*") is used where a metric has one; otherwise every
    host's value counts as a repeat.
    """
    has_aggregate = {(s.run_id, s.metric) for s in samples if s.host == AGGREGATE_HOST}
    groups: dict[tuple, list[float]] = defaultdict(list)
    units: dict[tuple, str] = {}
    for s in samples:
        if s.host != AGGREGATE_HOST and (s.run_id, s.metric) in has_aggregate:
            continue
        key = (s.workload, _setting(s), s.metric, s.backend)
        groups[key].append(s.value)
        units[key] = s.unit
    rows = []
    for key, values in groups.items():
        median = statistics.median(values)
        spread = (max(values) - min(values)) / 2 / median if median else 0.0
        rows.append({"workload": key[0], "setting": key[1], "metric": key[2], "backend": key[3],
                     "median": median, "min": min(values), "max": max(values), "n": len(values),
                     "spread": spread, "agree": spread <= AGREEMENT, "unit": units[key]})
    return rows


def table(store: ResultStore) -> Table:
    samples = store.samples()
    rows = summarize(samples)
    backends = list(dict.fromkeys(s.backend for s in samples))
    out = Table(title=f"campaign {store.dir.name}: median ± half-range over repetitions (n)",
                caption="† repeats differ by more than 5% of their median", title_justify="left")
    out.add_column("workload")
    out.add_column("metric")
    for backend in backends:
        out.add_column(backend, justify="right")
    cells: dict[tuple, dict[str, str]] = defaultdict(dict)
    for row in rows:
        if row["metric"] not in TABLE_METRICS:
            continue
        mark = "" if row["agree"] else " †"
        cells[(row["workload"], row["setting"], row["metric"])][row["backend"]] = (
            f"{human(row['median'], row['unit'])} ±{row['spread'] * 100:.1f}% ({row['n']}){mark}")
    order = {m: i for i, m in enumerate(TABLE_METRICS)}
    workloads = list(dict.fromkeys(s.workload for s in samples))
    for (workload, setting, metric), by_backend in sorted(
            cells.items(), key=lambda kv: (workloads.index(kv[0][0]), kv[0][1], order[kv[0][2]])):
        label = workload if setting == _setting_of_first(samples, workload) else f"{workload} {setting}"
        out.add_row(label, metric, *(by_backend.get(b, "—") for b in backends))
    return out


def _setting_of_first(samples: list[Sample], workload: str) -> str:
    settings = {_setting(s) for s in samples if s.workload == workload}
    return next(iter(settings)) if len(settings) == 1 else ""


def export(store: ResultStore, fmt: str) -> str:
    """Every sample as CSV (params and metadata as JSON columns) or as a JSON array."""
    samples = store.samples()
    if fmt == "json":
        return json.dumps([json.loads(s.to_json()) for s in samples], indent=1)
    buffer = io.StringIO()
    fields = ["campaign", "run_id", "repetition", "host", "backend", "workload", "metric", "value", "unit",
              "started_at", "ended_at", "params", "metadata"]
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    for s in samples:
        row = json.loads(s.to_json())
        writer.writerow({k: json.dumps(row[k], sort_keys=True) if k in ("params", "metadata") else row[k]
                         for k in fields})
    return buffer.getvalue()
