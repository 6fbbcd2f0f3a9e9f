"""A trace's replays in `./lab report`: per trace and backend, what the captured job's I/O does on that storage.

answers(samples)   {trace: [one line per backend]}: "this job's I/O on it: finishes in X s at recorded timing
                   (stalls Y s) / Z GiB/s as fast as possible", each figure the median over its repetitions
                   of the aggregate over hosts (iolab.kinds.replay.parser: the slowest host's time, the hosts' bytes)
table(samples)     the same as the report's lead (iolab.report.tables.print_report)
"""

from __future__ import annotations

import statistics
from typing import Any

from iolab.measures.samples import AGGREGATE_HOST, Sample
from iolab.report.tables import DEFAULT_UNITS, number, plain, unit_scale


def _medians(samples: list[Sample]) -> dict[tuple[str, str, str, str], float]:
    """{(trace, backend, timing, metric): the median over the repetitions} of the replays' aggregates."""
    found: dict[tuple[str, str, str, str], list[float]] = {}
    for s in samples:
        if s.host == AGGREGATE_HOST and s.metric in ("replay_s", "replay_stall_s", "replay_bw") and "trace" in s.params:
            key = (s.params["trace"], s.backend, s.params.get("timing", "recorded"), s.metric)
            found.setdefault(key, []).append(s.value)
    return {key: statistics.median(values) for key, values in found.items()}


def answers(samples: list[Sample], units: str = DEFAULT_UNITS) -> dict[str, list[str]]:
    """{trace: a line per backend} of the replays in `samples`."""
    medians = _medians(samples)
    out: dict[str, list[str]] = {}
    for trace, backend in dict.fromkeys((key[0], key[1]) for key in medians):
        parts = []
        if (seconds := medians.get((trace, backend, "recorded", "replay_s"))) is not None:
            stall = medians.get((trace, backend, "recorded", "replay_stall_s"), 0.0)
            parts.append(f"finishes in {number(seconds)} s at recorded timing (stalls {number(stall)} s)")
        if (rate := medians.get((trace, backend, "fast", "replay_bw"))) is not None:
            scale, label = unit_scale("B/s", rate, units)
            parts.append(f"{number(rate / scale)} {label} as fast as possible")
        out.setdefault(trace, []).append(f"{backend}: this job's I/O on it: {' / '.join(parts)}")
    return out


def table(samples: list[Sample], units: str = DEFAULT_UNITS) -> Any:
    """The answers as the report's lead, or None where the campaign replayed no trace."""
    from rich.console import Group

    found = answers(samples, units)
    if not found:
        return None
    lines = []
    for trace, rows in found.items():
        lines += [plain(f"trace {trace}, replayed (median over repetitions, all hosts):"), *map(plain, rows)]
    return Group(*lines)


LEADS = (table,)
