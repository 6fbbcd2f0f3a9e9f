"""One parser per tool: the tool's raw files on one host → measurements.

A parser reads only files (never a tool's human-readable output) from
`results/<campaign>/raw/<run_id>/<host>/` and returns a `Parsed`. The caller
adds the run's context (campaign, run id, host, backend, times) to make samples.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class Measurement:
    metric: str  # a shared metric name: read_bw, read_iops, read_clat_p99, samples_per_s, ...
    value: float
    unit: str  # canonical: B/s, B, IOPS, s, samples/s, %, ns, cores, count
    params: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Parsed:
    measurements: list[Measurement]
    metadata: dict[str, Any]  # tool version, effective options, ...
    error: str | None = None  # the tool's own error, if it reported one
    # Per-second time series of additive metrics, {metric: [(epoch seconds, value), ...]}, summed
    # over the tool's jobs: what the multi-host aggregate uses to add hosts up over a common window.
    series: dict[str, list[tuple[float, float]]] = dataclasses.field(default_factory=dict)


class ParseError(Exception):
    """The raw files are missing or not what the tool writes."""


def stderr_hint(path: Path) -> str:
    """'; stderr.txt ends: <its last line>' for a missing or bad result file, or '' when stderr says nothing."""
    try:
        lines = (path.parent / "stderr.txt").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return f"; stderr.txt ends: {lines[-1]!r}" if lines else ""


Parser = Callable[[Path], Parsed]


def load_json(path: Path, tool: str) -> dict[str, Any]:
    """A tool's JSON result file, or ParseError naming it (missing: with stderr.txt's last line)."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise ParseError(f"{path}: missing, {tool} wrote no result{stderr_hint(path)}") from None
    except (OSError, ValueError) as exc:
        raise ParseError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(document, dict):
        raise ParseError(f"{path}: not a result of {tool} (a JSON object)")
    return document
