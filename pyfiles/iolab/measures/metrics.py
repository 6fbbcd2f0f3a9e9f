"""The metric catalogue: what each metric means, declared once, by the parser of the tool that emits it.

Each parser module (iolab.parsers.*) lists the metrics it emits in a `METRICS` tuple of
`Metric` (the names several tools share, read_bw or read_clat_p99, are in iolab.parsers'
own); this module gathers them, and whatever needs a metric's meaning asks it here:

    unit       the canonical unit of its samples (and of its telemetry chart's axis)
    hosts      how host "*" is made (record.aggregate): SUM, each host's mean over the window
               all hosts ran, added up; a function, the tool's own rule (the checkpoint's bytes
               over the slowest rank of all); None, no aggregate
    judged     whether its repeats must agree (validity's repeats_disagree: the figures of merit)
    better     HIGHER or LOWER wins (report's "who wins")
    table      its row's place in the report's tables; None: in the exports and extras only
    wins       whether "who wins" compares it
    headline   its place among the figures a run's line names first (record.headline)
    chart      BARS (a bar chart per point) or PERCENTILES (the latency chart) on the HTML page
    timeline   its place among the HTML page's telemetry charts

A name may be a family's shell pattern (`dev_*_await`); an exact name wins over a pattern.
tests/unit/test_metrics.py fails when a parser emits a metric, or a unit, that is not declared.
"""

from __future__ import annotations

import fnmatch
import functools
import math

from iolab import parsers
from iolab.kinds import registry
from iolab.parsers import Metric

# What iolab makes itself rather than a tool's parser: a search's answer (run.accelerators, run.kvcache_search).
OWN = (
    Metric("accelerators_fed", "count", "accelerators per host kept at the AU threshold", headline=10),
    Metric("kv_served", "count", "KV-cache users per client (clients per host) under the latency bound", headline=11),
)
UNDECLARED = Metric("", "", "not in the catalogue")


@functools.cache
def catalogue() -> dict[str, Metric]:
    """Every declared metric by name (patterns too): OWN, the METRICS of iolab.parsers and of each parser.

    A name declared twice must be declared alike (ValueError otherwise).
    """
    modules = [parsers, *registry.parser_modules()]
    out: dict[str, Metric] = {}
    for metric in [*OWN, *(m for module in modules for m in getattr(module, "METRICS", ()))]:
        if out.setdefault(metric.name, metric) != metric:
            raise ValueError(f"metric {metric.name} is declared twice, differently")
    return out


@functools.cache
def of(name: str) -> Metric:
    """The declaration of a metric name (not a label: 'cpu_cores', not 'cpu_cores{mode=user}'); UNDECLARED
    for a name the catalogue lacks (a sample stored by another version)."""
    known = catalogue()
    if name in known:
        return known[name]
    return next((m for pattern, m in known.items() if fnmatch.fnmatchcase(name, pattern)), UNDECLARED)


@functools.cache
def ordered(place: str) -> tuple[str, ...]:
    """The names with a place in `place` ('table', 'headline', 'timeline'), in its order."""
    placed = [m for m in catalogue().values() if getattr(m, place) is not None]
    return tuple(m.name for m in sorted(placed, key=lambda m: getattr(m, place)))


@functools.cache
def named(flag: str, value: object = True) -> frozenset[str]:
    """The exact names whose `flag` is `value`: named('judged'), named('chart', BARS)."""
    return frozenset(name for name, m in catalogue().items() if getattr(m, flag) == value)


def rank(label: str) -> tuple[float, str]:
    """Sort key of a metric label: the tables' metrics in their order, then the rest by name."""
    place = of(label.split("{", 1)[0]).table
    return (math.inf if place is None else place, label)
