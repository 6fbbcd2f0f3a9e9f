"""A trace's replay (iolab.host.trace_fio) on one host → fio's figures, and how long the job's I/O took there.

    replay_s         from the replay's start to its last process's end: fio's startdelay of each job
                     (its process's first I/O as recorded) plus fio's job_runtime, the latest    s
    replay_stall_s   timing: recorded only: replay_s less the trace's own span (first I/O to the last
                     one's end, as recorded), or 0 where it ended in time: how long the job would
                     have waited on this storage beyond what it waited where it was captured        s
    replay_bw        the bytes read and written over replay_s                                       B/s

and fio's own (iolab.parsers.fio): read_bw, read_iops, latency percentiles over every job. The
metadata carries the trace's hash and recorded figures; a replay that moved other bytes than the
trace (times its copies) is an error: it did not replay the trace.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iolab.parsers import LOWER, SUM, Measurement, Metric, Parsed, ParseError, Stored, load_json
from iolab.parsers import fio as fio_parser

TOOLS = ("replay",)
RESULT = "replay.json"


def _slowest(group: Sequence[Stored], run: Sequence[Stored]) -> tuple[float, dict[str, Any]]:
    """A replay over hosts ends with its slowest host."""
    return max(s.value for s in group), {"aggregate": "the slowest host's"}


METRICS = (
    Metric("replay_s", "s", "the job's I/O replayed, start to end", LOWER, hosts=_slowest, judged=True, table=60),
    Metric("replay_stall_s", "s", "later than recorded, at recorded timing", LOWER, hosts=_slowest, table=61),
    Metric("replay_bw", "B/s", "bytes replayed/s", hosts=SUM, judged=True, table=62, wins=True, headline=65),
)


def _runtimes(host_dir: Path) -> dict[str, float]:
    """{job name: fio's job_runtime in s} of fio.json."""
    try:
        document = json.loads((host_dir / "fio.json").read_text(errors="replace"))
        return {job["jobname"]: job["job_runtime"] / 1000 for job in document["jobs"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ParseError(f"{host_dir / 'fio.json'}: no job runtimes ({exc})") from None


def parse(host_dir: Path) -> Parsed:
    host_dir = Path(host_dir)
    record = load_json(host_dir / RESULT, "the trace's replay")
    fio = fio_parser.parse(host_dir)
    runtimes = _runtimes(host_dir)
    jobs = record.get("jobs") or {}
    if set(jobs) != set(runtimes):
        raise ParseError(f"{host_dir / RESULT}: its jobs are not fio.json's")
    # fio counts a job's runtime in whole ms: a replay shorter than 1 ms counts as 1 ms
    seconds = max(0.001, max(jobs[name]["startdelay_s"] + runtimes[name] for name in jobs))
    moved = {ddir: fio.metadata[f"fio_{ddir}_bytes"] for ddir in ("read", "write")}
    recorded = record["recorded_bytes"]
    error = fio.error
    if moved != recorded and not error:
        error = f"the replay moved {moved} bytes, the trace {recorded}: it did not replay the trace"
    out = [Measurement("replay_s", seconds, "s"), Measurement("replay_bw", sum(moved.values()) / seconds, "B/s")]
    if record["timing"] == "recorded":
        out.append(Measurement("replay_stall_s", max(0.0, seconds - record["recorded_s"]), "s"))
    return Parsed(
        measurements=out + fio.measurements,
        metadata={
            **fio.metadata,
            "replay": {key: record[key] for key in ("trace", "timing", "copies", "own_files", "recorded_s")},
            "replay_bytes": moved,
            "replay_recorded_bytes": recorded,
        },
        error=error,
        series=fio.series,
    )
