"""One parser per tool: the tool's raw files on one host → measurements. Each kind's parser is its folder's
(iolab.kinds.<kind>.parser); this package holds what they stand on and the parsers several kinds read (fio's,
telemetry's, the faults').

A parser reads only files (never a tool's human-readable output) from
`results/<campaign>/raw/<run_id>/<host>/` and returns a `Parsed`. The caller
adds the run's context (campaign, run id, host, backend, times) to make samples.

Each parser module declares the metrics it emits in a `METRICS` tuple of `Metric` (what the
metric means: unit, aggregate over hosts, ...); the names several tools share are declared
here. iolab.measures.metrics gathers them into the catalogue that records and reports read.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from iolab.shared import tooltail


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
    # The tool's measured window (epoch seconds: start, end) where it measures less than its whole run (a loader
    # leaves its start-up and first step out): the host's telemetry is summed over the same window.
    window: tuple[float, float] | None = None


class ParseError(Exception):
    """The raw files are missing or not what the tool writes."""


def stderr_hint(path: Path) -> str:
    """'; stderr.txt ends: <its last error line>' for a missing or bad result file (iolab.shared.tooltail: not
    mpirun's banner), or '' when stderr says nothing."""
    said = tooltail.file_message(path.parent / "stderr.txt")
    return f"; stderr.txt ends: {said!r}" if said else ""


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


def failure_message(res: dict[str, Any]) -> str:
    """The sentence worth showing from a failed task's result (a loop's: its first failed item's): Ansible's, and
    error.json's beside a run's files (run.yml's rescue, iolab.drive.fanout)."""
    failed_items = [item for item in res.get("results", []) if isinstance(item, dict) and item.get("failed")]
    if failed_items:
        return failure_message(failed_items[0])
    msg = str(res.get("msg") or "").strip()
    stderr = str(res.get("stderr") or "").strip().splitlines()
    stdout = str(res.get("stdout") or "").strip().splitlines()
    detail = stderr[-1] if stderr else (stdout[-1] if stdout and not msg else "")
    if msg.startswith("non-zero return code") and detail:
        return f"{detail} (rc {res.get('rc')})"
    return f"{msg}: {detail}" if msg and detail else msg or detail or "failed (no message)"


# --- what each metric means: declared here and by each parser (the catalogue, iolab.measures.metrics) ---------

HIGHER, LOWER = "higher", "lower"  # which way a metric wins
SUM = "sum"  # host "*": each host's mean over the window all of them ran, added up (record.aggregate)
BARS, PERCENTILES = "bars", "percentiles"  # its chart on the HTML page: per point, or the latency chart


class Stored(Protocol):
    """What a host rule reads of a stored sample (iolab.measures.samples.Sample, which reads the catalogue's units)."""

    @property
    def host(self) -> str: ...
    @property
    def metric(self) -> str: ...
    @property
    def value(self) -> float: ...
    @property
    def metadata(self) -> dict[str, Any]: ...


# A tool's own rule for host "*": (the metric's sample on every host, all of the run's host samples)
# → (the value for all hosts, what the aggregate's metadata adds).
HostRule = Callable[[Sequence[Stored], Sequence[Stored]], tuple[float, dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class Metric:
    """What a metric means, declared once, in the METRICS tuple of the parser that emits it."""

    name: str  # or a family's shell pattern, 'dev_*_await' (an exact name wins over a pattern)
    unit: str  # canonical, as its measurements carry it (and its telemetry chart's axis)
    about: str  # what it measures, in a few words
    better: str = HIGHER
    hosts: str | HostRule | None = None  # how host "*" is made: SUM, the tool's rule, or None (not made)
    judged: bool = False  # a figure of merit: its repeats must agree (validity's repeats_disagree)
    table: int | None = None  # its row's place in the report's tables; None: exports and extras only
    wins: bool = False  # compared in "who wins"
    headline: int | None = None  # its place among the figures a run's line may name (record.headline)
    chart: str | None = None  # BARS or PERCENTILES: its chart on the HTML page
    timeline: int | None = None  # its place among the HTML page's telemetry charts


# The names every storage tool shares (fio's, the object benchmark's, the loaders' read_bw), so that
# their figures meet in one row of the report.
METRICS = (
    Metric("read_bw", "B/s", "bytes read/s", hosts=SUM, judged=True, table=10, wins=True, headline=30, chart=BARS),
    Metric("write_bw", "B/s", "bytes written/s", hosts=SUM, judged=True, table=20, wins=True, headline=40, chart=BARS),
    Metric("read_iops", "IOPS", "reads done/s", hosts=SUM, judged=True, table=30, wins=True, headline=50, chart=BARS),
    Metric("write_iops", "IOPS", "writes done/s", hosts=SUM, judged=True, table=40, wins=True, chart=BARS),
    Metric("read_clat_p50", "ns", "read latency, median", LOWER, table=110, chart=PERCENTILES),
    Metric("read_clat_p99", "ns", "read latency, 99th percentile", LOWER, table=120, wins=True, chart=PERCENTILES),
    Metric("read_clat_p999", "ns", "read latency, 99.9th percentile", LOWER, table=130, chart=PERCENTILES),
    Metric("write_clat_p50", "ns", "write latency, median", LOWER, chart=PERCENTILES),
    Metric("write_clat_p99", "ns", "write latency, 99th percentile", LOWER, table=140, wins=True, chart=PERCENTILES),
    Metric("write_clat_p999", "ns", "write latency, 99.9th percentile", LOWER, chart=PERCENTILES),
    Metric("*_clat_p*", "ns", "request latency at a percentile", LOWER),
    Metric("cpu_cores", "cores", "CPU busy, in cores", LOWER, timeline=40),
    Metric("gpu_util", "%", "GPU busy", timeline=130),
    Metric("gpu_mem_used", "B", "a GPU's memory in use, at most", timeline=140),
)


def modules() -> list[Any]:
    """This package's parser modules (one per tool: each declares its METRICS, and the tools it parses in TOOLS); with
    each kind folder's parser.py they are iolab.kinds.registry's parser modules."""
    import importlib
    import pkgutil
    import sys

    package = sys.modules[__name__]
    return [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(package.__path__)]
