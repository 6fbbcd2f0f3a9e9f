"""A run's telemetry as the HTML report draws it: each host's series read back from its `telemetry.jsonl`
(iolab.host.telemetry's records, or a file of generic {"t", "name": value} lines), grouped into charts."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from iolab.measures import metrics
from iolab.store import ceph

TELEMETRY_FILE = "telemetry.jsonl"
TELEMETRY_LINES = 6  # lines per telemetry chart, the busiest first


def load_telemetry(host_dir: Path) -> dict[str, list[tuple[float, float]]]:
    """{series name: [(seconds into the run, value), ...]} of one host's telemetry.jsonl.

    The telemetry parser's own series when it is there (named like its summary
    metrics, `dev_read_bw{device=vda}`); otherwise every numeric field of the
    lines that have a `t`, by its dotted path (`disk.vda.rB_s`).
    """
    from iolab.parsers.telemetry import load_series

    try:
        series = load_series(host_dir)
    except Exception:  # a file the parser refuses still has numbers to draw
        series = {}
    if not series:
        series = _generic_series(host_dir / TELEMETRY_FILE)
    series.update(ceph.load_series(host_dir))  # a Ceph backend's OSDs, sampled from this host
    if not series:
        return {}
    t0 = min(t for points in series.values() for t, _ in points)
    start = _start_time(host_dir / TELEMETRY_FILE)
    origin = start if start is not None and start <= t0 else t0
    return {name: [(t - origin, v) for t, v in points] for name, points in series.items()}


def _lines(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("t"), (int, float)):
            out.append(record)
    return out


def _start_time(path: Path) -> float | None:
    for record in _lines(path):
        if record.get("type") == "start":
            return float(record["t"])
    return None


def _generic_series(path: Path) -> dict[str, list[tuple[float, float]]]:
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)

    def walk(prefix: str, value: Any, t: float) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            series[prefix].append((t, float(value)))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item, t)

    for record in _lines(path):
        if record.get("type") in ("start", "end"):
            continue
        t = float(record["t"])
        for key, value in record.items():
            if key not in ("t", "dt", "type"):
                walk(key, value, t)
    return dict(series)


def _telemetry_unit(base: str) -> str:
    """A chart's unit: the catalogue's, or for the generic series of a file the parser refused, its name's."""
    if metrics.of(base) is not metrics.UNDECLARED:
        return metrics.of(base).unit
    if base.endswith(("_bw", "B_s")):
        return "B/s"
    if base.startswith("mem") or base.endswith(("_size", "_bytes")):
        return "B"
    if base.endswith("util"):
        return "%"
    if base.endswith("await"):
        return "s"
    if base.startswith("cpu"):
        return "cores"
    return ""


def telemetry_charts(series: dict[str, list[tuple[float, float]]]) -> list[tuple[str, dict, str]]:
    """(chart name, {line: points}, unit) per kind of series; lines that stay at zero are left out."""
    by_base: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(dict)
    for name, points in series.items():
        if len(points) < 2 or not any(v for _, v in points):
            continue
        if "{" in name:
            base, qualifier = name.split("{", 1)
            by_base[base][qualifier.rstrip("}").split("=", 1)[-1]] = points
        else:
            # Generic dotted paths: disk.vda.rB_s → chart disk.rB_s, line vda; cpu.user → chart cpu, line user.
            parts = name.split(".")
            if len(parts) == 1:
                by_base[name][name] = points
            elif len(parts) == 2:
                by_base[parts[0]][parts[1]] = points
            else:
                by_base[f"{parts[0]}.{parts[-1]}"][".".join(parts[1:-1])] = points
    out = []
    for base in sorted(by_base, key=lambda b: (metrics.of(b).timeline or math.inf, b)):
        lines = by_base[base]
        busiest = sorted(lines, key=lambda k: -statistics.fmean(v for _, v in lines[k]))[:TELEMETRY_LINES]
        out.append((base, {k: lines[k] for k in busiest}, _telemetry_unit(base)))
    return out
