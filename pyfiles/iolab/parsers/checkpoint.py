"""checkpoint.json (iolab.host.checkpoint) on one host → checkpoint write and read figures.

    checkpoint_write_bw   the host's bytes written / its slowest rank's write time (fsync included)   B/s
    checkpoint_write_s    the slowest rank's write time                                              s
    checkpoint_read_bw    the host's bytes read back / its slowest rank's read time                  B/s
    checkpoint_read_s     the slowest rank's read time                                               s

The metadata carries each phase's bytes and ranks on the host, so that the aggregate over
hosts is the whole checkpoint over the slowest rank of all (record.aggregate).
"""

from __future__ import annotations

from pathlib import Path

from iolab.parsers import Measurement, Parsed, ParseError, load_json, stderr_hint

PHASES = ("write", "read")


def parse(host_dir: Path) -> Parsed:
    path = Path(host_dir) / "checkpoint.json"
    document = load_json(path, "the checkpoint benchmark")
    out, moved = [], {}
    for phase in PHASES:
        ranks = (document.get(phase) or {}).get("ranks") or []
        if not ranks:
            raise ParseError(f"{path}: no {phase} phase recorded{stderr_hint(path)}")
        seconds = max(r["ended_at"] - r["started_at"] for r in ranks)
        total = sum(r["bytes"] for r in ranks)
        if seconds <= 0 or total <= 0:
            raise ParseError(f"{path}: the {phase} phase moved {total} bytes in {seconds} s")
        moved[phase] = {"bytes": total, "ranks": len(ranks)}
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
        },
    )
