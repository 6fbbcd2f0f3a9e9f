"""checkpoint.json (iolab.kinds.checkpoint.host) on one host → checkpoint write and read figures.

    checkpoint_write_bw   the host's bytes of a checkpoint / its slowest rank's write time (fsync included)   B/s
    checkpoint_write_s    the slowest rank's write time of a checkpoint                                     s
    checkpoint_read_bw    the host's bytes of a checkpoint / its slowest rank's read time                   B/s
    checkpoint_read_s     the slowest rank's read time of a checkpoint                                      s

A run of N checkpoints (MLPerf Storage's 10 written, then 10 read) gives each phase's mean over
its checkpoints: the mean of their durations, a checkpoint's bytes over that mean. The metadata
also says how many were written and read, and the gap between the last write's end and the first
read's start (`checkpoint_read_gap_s`, MLPerf's rule 4.7.1 asks for under 30 s).

The metadata carries each phase's bytes and ranks on the host, so that the aggregate over
hosts is the whole checkpoint over the slowest rank of all (`over_hosts`, the metrics' rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iolab.parsers import LOWER, Measurement, Metric, Parsed, ParseError, Stored, load_json, stderr_hint

PHASES = ("write", "read")


def over_hosts(group: Sequence[Stored], run: Sequence[Stored]) -> tuple[float, dict[str, Any]]:
    """A checkpoint over every host: all of its bytes over the slowest rank of all (MLPerf's duration)."""
    metric = group[0].metric
    phase = metric.split("_")[1]
    times = [s for s in run if s.metric == f"checkpoint_{phase}_s"]
    slowest = max(s.value for s in times)
    moved = {key: sum(s.metadata["checkpoint"][phase][key] for s in times) for key in ("bytes", "ranks")}
    return slowest if metric.endswith("_s") else moved["bytes"] / slowest, {
        "checkpoint": {phase: moved},
        "aggregate": "every host's bytes over the slowest rank of all hosts",
    }


TOOLS = ("checkpoint",)

METRICS = (
    Metric("checkpoint_write_bw", "B/s", "written/s", hosts=over_hosts, judged=True, table=70, wins=True, headline=70),
    Metric("checkpoint_read_bw", "B/s", "read back/s", hosts=over_hosts, judged=True, table=80, wins=True),
    Metric("checkpoint_write_s", "s", "the slowest rank's write time", LOWER, hosts=over_hosts, table=90),
    Metric("checkpoint_read_s", "s", "the slowest rank's read time", LOWER, hosts=over_hosts, table=100),
)


def parse(host_dir: Path) -> Parsed:
    path = Path(host_dir) / "checkpoint.json"
    document = load_json(path, "the checkpoint benchmark")
    out, moved, counts = [], {}, {}
    for phase in PHASES:
        ranks = (document.get(phase) or {}).get("ranks") or []
        if not ranks:
            raise ParseError(f"{path}: no {phase} phase recorded{stderr_hint(path)}")
        by_checkpoint: dict[int, list[dict]] = {}
        for entry in ranks:
            by_checkpoint.setdefault(entry.get("checkpoint", 1), []).append(entry)
        seconds = sum(max(r["ended_at"] - r["started_at"] for r in c) for c in by_checkpoint.values()) / len(
            by_checkpoint
        )
        total = sum(r["bytes"] for r in ranks) // len(by_checkpoint)
        if seconds <= 0 or total <= 0:
            raise ParseError(f"{path}: the {phase} phase moved {total} bytes in {seconds} s")
        moved[phase] = {"bytes": total, "ranks": max(len(c) for c in by_checkpoint.values())}  # a checkpoint's
        counts[phase] = len(by_checkpoint)
        out += [
            Measurement(f"checkpoint_{phase}_bw", total / seconds, "B/s"),
            Measurement(f"checkpoint_{phase}_s", seconds, "s"),
        ]
    read = document["read"]
    resident = read.get("resident_before_bytes")
    return Parsed(
        measurements=out,
        metadata={
            "checkpoint": moved,
            "checkpoint_fsync": document["write"].get("fsync", False),
            # What of the shards was still in this host's page cache as the read began: 0 for a cold read.
            "checkpoint_resident_before_read_bytes": resident,
            "checkpoint_read_cold": resident == 0 if resident is not None else None,
            "checkpoint_ranks": {phase: document[phase]["ranks"] for phase in PHASES},
            "checkpoint_count": counts,
            # From the end of the last write to the start of the first read (s): caches dropped in between.
            "checkpoint_read_gap_s": min(r["started_at"] for r in read["ranks"])
            - max(r["ended_at"] for r in document["write"]["ranks"]),
        },
    )
