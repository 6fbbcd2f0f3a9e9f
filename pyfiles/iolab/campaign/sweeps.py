"""A campaign's workloads as sweep points, and its size counted before they are made.

sweep(workload)                     → its points: list values as a cartesian product, `zip:` lists paired
check_size(data, source, max_runs)  → refuses a campaign too large to be meant (iolab.campaign.model.MAX_RUNS)
"""

from __future__ import annotations

import itertools
from typing import Any

from iolab.errors import UserError

# The workloads and backends a campaign may have before it is refused as a mistake.
MAX_WORKLOADS = 1_000
MAX_BACKENDS = 100
# The workload keys a campaign may set for all its workloads.
WORKLOAD_DEFAULTS = ("cache", "warm_command", "warmup", "allow_caching", "timeout", "start_skew_max")
NOT_SWEPT = ("warm_command", "profilers", "faults")  # list-valued keys that are one value, not a sweep


def workload_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """The keys a campaign file sets for all its workloads (WORKLOAD_DEFAULTS), where it sets them."""
    return {k: data[k] for k in WORKLOAD_DEFAULTS if data.get(k) is not None}


def sweep(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """A workload's sweep points: list values as a cartesian product, `zip:` lists paired.

    {'bs': ['4k', '1M'], 'rw': 'read'} → [{'bs': '4k', 'rw': 'read'}, {'bs': '1M', 'rw': 'read'}];
    {'zip': {'bs': ['4k', '1M'], 'iodepth': [32, 4]}} → bs 4k with iodepth 32, bs 1M with iodepth 4.
    """
    raw = dict(raw)
    paired = raw.pop("zip", None)
    rows: list[dict[str, Any]] = [{}]
    if paired is not None:
        if not isinstance(paired, dict) or not paired or not all(isinstance(v, list) and v for v in paired.values()):
            raise ValueError(
                "zip: takes a mapping of keys to lists of equal length, e.g. zip: {bs: [4k, 1M], iodepth: [32, 4]}"
            )
        lengths = {k: len(v) for k, v in paired.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(
                "zip: lists must have equal lengths, got " + ", ".join(f"{k}: {n}" for k, n in lengths.items())
            )
        both = sorted(set(paired) & set(raw))
        if both:
            raise ValueError(f"zip: {', '.join(both)} also given outside zip; give each key once")
        rows = [dict(zip(paired, values, strict=False)) for values in zip(*paired.values(), strict=False)]
    keys = [k for k, v in raw.items() if isinstance(v, list) and k not in NOT_SWEPT]
    return [
        {**raw, **dict(zip(keys, values, strict=False)), **row}
        for values in itertools.product(*(raw[k] for k in keys))
        for row in rows
    ]


def _points(workload: dict[str, Any]) -> int:
    """How many sweep points a workload makes, counted without making them."""
    count = 1
    for key, value in workload.items():
        if isinstance(value, list) and key not in NOT_SWEPT:
            count *= len(value)
    paired = workload.get("zip")
    if isinstance(paired, dict) and paired:
        count *= max(len(v) if isinstance(v, list) else 1 for v in paired.values())
    return count


def check_size(data: dict[str, Any], source: str, max_runs: int) -> None:
    """Refuse a campaign too large to be meant, before its sweeps are expanded."""
    workloads, backends = data.get("workloads"), data.get("backends")
    for key, items, limit in (("workloads", workloads, MAX_WORKLOADS), ("backends", backends, MAX_BACKENDS)):
        if isinstance(items, list) and len(items) > limit:
            raise UserError(
                f"{source}: {key}: {len(items):,} entries, more than the {limit:,} a campaign may "
                "have; split it into several campaigns"
            )
    if not isinstance(workloads, list) or not isinstance(backends, list):
        return
    defaults = workload_defaults(data)
    points = sum(
        _points({**defaults, **w}) * (2 if {**defaults, **w}.get("cache") == "warm" else 1)
        for w in workloads
        if isinstance(w, dict)
    )
    repetitions = max(v for v in (data.get("repetitions"), data.get("max_repetitions"), 1) if isinstance(v, int))
    hosts = data.get("hosts_sweep")
    runs = points * len(backends) * repetitions * (len(hosts) if isinstance(hosts, list) and hosts else 1)
    if runs > max_runs:
        raise UserError(
            f"{source}: the campaign makes {runs:,} runs (sweeps x backends x repetitions), more than "
            f"{max_runs:,}; shorten its sweeps, or pass --max-runs {runs} if that many is meant"
        )
