"""fio's JSON+ output on one host → bandwidth, IOPS, latency percentiles, CPU.

The bench_fio role runs fio with `--output=fio.json --output-format=json+` and
keeps stderr apart in `stderr.txt`. JSON+ adds each direction's completion-latency
histogram (`clat_ns.bins`: bucket value in ns → count), which is what lets us merge
latencies across jobs: an average of per-job percentiles is not a percentile of
anything, while the percentile of the merged histogram is that of all IOs of the run.

Percentiles use the nearest-rank definition, the one fio itself applies to the
same histogram (stat.c, calc_clat_percentiles): the p-th percentile of N latencies
is the smallest bucket value v such that at least ceil(p/100 * N) latencies are
<= v. fio's buckets are log-linear (64 per power of two, each reported by its
midpoint), so a percentile is exact to within one bucket, about 1.6 % of its value.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

from iolab.parsers import LOWER, Measurement, Metric, Parsed, ParseError, stderr_hint

# Metric suffix → percentile; exact fractions so 99.9 % of N is not off by a rounding.
PERCENTILES: dict[str, Fraction] = {"p50": Fraction(50), "p99": Fraction(99), "p999": Fraction(999, 10)}
DIRECTIONS = ("read", "write")
# Besides the shared read_bw, read_iops, read_clat_p99, ... (iolab.parsers.METRICS):
TOOLS = ("fio",)

METRICS = (
    Metric("cpu_usr", "%", "the jobs' user CPU, in percent of one core", LOWER),
    Metric("cpu_sys", "%", "the jobs' system CPU, in percent of one core", LOWER),
)
_JSON_START = re.compile(r"^\{", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class _Direction:
    """One job's figures for one direction (read or write)."""

    io_bytes: int
    bw_bytes: float
    iops: float
    runtime_ms: int
    clat_bins: Counter[int]  # completion latency bucket (ns) → IOs


@dataclasses.dataclass(frozen=True)
class _Job:
    index: int
    name: str
    error: int  # an errno, 0 when the job succeeded
    options: dict[str, str]  # the job's own options, without the global ones
    usr_cpu: float
    sys_cpu: float
    directions: dict[str, _Direction]

    @property
    def did_io(self) -> bool:
        return any(d.io_bytes > 0 for d in self.directions.values())


def parse(host_dir: Path) -> Parsed:
    """Measurements, metadata and fio's own error from `host_dir/fio.json`.

    fio_runtime_ms is the longest read or write runtime of any job: the run's
    measured window (ramp_time excluded). fio_read_bytes / fio_write_bytes are
    the bytes each direction moved in that window, summed over jobs (fio's
    io_bytes): what the caching check compares with the host's memory. fio
    leaves out "global options" when every option follows the first --name,
    hence the default.
    """
    path = Path(host_dir) / "fio.json"
    document = _load(path)
    jobs = [_job(raw, index, path) for index, raw in enumerate(document["jobs"])]
    return Parsed(
        measurements=_measurements(jobs),
        metadata={
            "fio_version": document.get("fio version"),
            "fio_options": _options(document.get("global options", {}), jobs),
            "fio_jobs": len(jobs),
            "fio_runtime_ms": max(d.runtime_ms for job in jobs for d in job.directions.values()),
            **{f"fio_{ddir}_bytes": sum(job.directions[ddir].io_bytes for job in jobs) for ddir in DIRECTIONS},
            "fio_timestamp": document.get("timestamp"),
        },
        error=_error(jobs),
        series=_bw_series(Path(host_dir), document, jobs),
    )


def _bw_series(host_dir: Path, document: Mapping[str, Any], jobs: list[_Job]) -> dict[str, list[tuple[float, float]]]:
    """read_bw / write_bw per log interval from fio's bandwidth logs (fio_bw.<job>.log), jobs summed.

    A log line is `msec, KiB/s, direction (0 read, 1 write), bs, offset`, msec counted
    from the end of the ramp. fio's JSON gives the time it finished (timestamp_ms) and
    the measured runtime, which place the series on the wall clock.
    """
    logs = sorted(host_dir.glob("fio_bw.*.log"))
    if not logs or "timestamp_ms" not in document:
        return {}
    runtime_ms = max(d.runtime_ms for job in jobs for d in job.directions.values())
    start = (document["timestamp_ms"] - runtime_ms) / 1000
    sums: dict[tuple[str, int], float] = {}
    for log in logs:
        for ddir, second, value in _log_seconds(log):
            sums[(ddir, second)] = sums.get((ddir, second), 0.0) + value
    # A second without a line moved nothing: fio logs only the intervals that completed I/O. A stall that lasts to the
    # job's end leaves no line after it, so the seconds from the last line to the measured runtime's end (which counts
    # the stall) are zeros too, all but the last: fio often logs no partial interval at its end (its log's intervals
    # drift by a few ms each on a loaded machine), and a run that moved data then is no stall.
    ends = runtime_ms // 1000 - 1
    for ddir in DIRECTIONS:
        seconds = [second for d, second in sums if d == ddir]
        for second in range(min(seconds), max(max(seconds), ends)) if seconds else ():
            sums.setdefault((ddir, second), 0.0)
    series: dict[str, list[tuple[float, float]]] = {}
    for (ddir, second), value in sorted(sums.items(), key=lambda kv: kv[0][1]):
        series.setdefault(f"{ddir}_bw", []).append((start + second, value))
    return series


STALL_MS = 1500  # lines further apart than this: fio skipped an interval (nothing completed in it)


def _log_seconds(log: Path) -> Iterable[tuple[str, int, float]]:
    """(direction, second, B/s) of one bandwidth log: each line on the second nearest its time (jobs log within a
    few ms of each other), and a second its line drifted past (a line 1,246 ms after the one before, from
    15,277 ms to 16,523 ms: seconds 15 and 17) given that line's rate, which fio averaged over the time since the
    one before: no line for a second means nothing moved only where the lines are STALL_MS or more apart."""
    last: dict[str, tuple[int, int]] = {}  # direction → (ms, second) of its line before
    for line in log.read_text().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3 or not fields[0].isdigit() or fields[2] not in ("0", "1"):
            continue
        ddir, ms, value = DIRECTIONS[int(fields[2])], int(fields[0]), float(fields[1]) * 1024
        second = (ms + 500) // 1000
        before = last.get(ddir)
        drifted = range(before[1] + 1, second) if before and ms - before[0] < STALL_MS else range(0)
        yield from ((ddir, skipped, value) for skipped in drifted)
        yield ddir, second, value
        last[ddir] = (ms, second)


def errors(host_dir: Path) -> int:
    """The I/O errors fio's jobs counted and went on after (`continue_on_error`: `total_err`), and each job that
    stopped on one (its `error`)."""
    document = _load(Path(host_dir) / "fio.json")
    return sum(int(job.get("total_err", 0)) or bool(job.get("error")) for job in document["jobs"])


def nearest_rank(bins: Mapping[int, int], percent: Fraction) -> int:
    """The smallest bucket value with at least ceil(percent/100 * N) of the N counts at or below it.

    >>> nearest_rank({100: 2, 200: 1, 300: 1}, Fraction(50)), nearest_rank({100: 2, 200: 1, 300: 1}, Fraction(51))
    (100, 200)
    """
    rank = max(1, math.ceil(percent * sum(bins.values()) / 100))
    seen = 0
    for value in sorted(bins):
        seen += bins[value]
        if seen >= rank:
            return value
    raise ValueError("nearest_rank of an empty histogram")


def _load(path: Path) -> dict[str, Any]:
    """The JSON document of fio.json, after any notices fio printed before it."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ParseError(f"{path}: missing, fio wrote no JSON{stderr_hint(path)}") from None
    except OSError as exc:
        raise ParseError(f"{path}: cannot read: {exc.strerror}") from None
    if not text.strip():
        raise ParseError(f"{path}: empty, fio wrote no JSON{stderr_hint(path)}")
    # fio writes some notices ("fio: pid=0, err=30/...") into the output file before the JSON.
    start = _JSON_START.search(text)
    if start is None:
        raise ParseError(f"{path}: no line starts with '{{', not fio JSON{stderr_hint(path)}")
    try:
        document, _ = json.JSONDecoder().raw_decode(text, start.start())
    except json.JSONDecodeError as exc:
        raise ParseError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(document, dict) or not isinstance(document.get("jobs"), list) or not document["jobs"]:
        raise ParseError(f'{path}: fio JSON without "jobs" (expected a list of at least one job)')
    return document


def _job(raw: Any, index: int, path: Path) -> _Job:
    """One entry of "jobs", checked once so the rest of the parser can trust it."""
    try:
        return _Job(
            index=index,
            name=str(raw["jobname"]),
            error=int(raw["error"]),
            options={str(k): str(v) for k, v in raw.get("job options", {}).items()},
            usr_cpu=float(raw["usr_cpu"]),
            sys_cpu=float(raw["sys_cpu"]),
            directions={ddir: _direction(raw[ddir], ddir) for ddir in DIRECTIONS},
        )
    except KeyError as exc:
        raise ParseError(f"{path}: job #{index} has no {exc.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise ParseError(f"{path}: job #{index}: {exc}") from None


def _direction(raw: Mapping[str, Any], ddir: str) -> _Direction:
    clat = raw["clat_ns"]
    io_bytes = int(raw["io_bytes"])
    if io_bytes and not clat.get("bins"):
        # Plain --output-format=json has percentiles but no histogram to merge.
        raise ValueError(f"{ddir} did IO but has no clat_ns.bins (write fio's output with --output-format=json+)")
    return _Direction(
        io_bytes=io_bytes,
        bw_bytes=float(raw["bw_bytes"]),
        iops=float(raw["iops"]),
        runtime_ms=int(raw["runtime"]),
        clat_bins=Counter({int(ns): int(count) for ns, count in clat.get("bins", {}).items()}),
    )


def _measurements(jobs: list[_Job]) -> list[Measurement]:
    """Sums over jobs, for the directions that did IO, and CPU of the jobs that ran.

    cpu_usr and cpu_sys are the sum of the jobs' usr_cpu / sys_cpu: percent of one
    core, so four jobs each keeping a core busy read 400 %.
    """
    out: list[Measurement] = []
    for ddir in DIRECTIONS:
        active = [job.directions[ddir] for job in jobs if job.directions[ddir].io_bytes > 0]
        if active:
            out.extend(_direction_measurements(ddir, active))
    ran = [job for job in jobs if job.did_io]
    if ran:
        out.append(Measurement("cpu_usr", sum(job.usr_cpu for job in ran), "%"))
        out.append(Measurement("cpu_sys", sum(job.sys_cpu for job in ran), "%"))
    return out


def _direction_measurements(ddir: str, directions: list[_Direction]) -> list[Measurement]:
    merged: Counter[int] = sum((d.clat_bins for d in directions), Counter())
    return [
        Measurement(f"{ddir}_bw", sum(d.bw_bytes for d in directions), "B/s"),
        Measurement(f"{ddir}_iops", sum(d.iops for d in directions), "IOPS"),
        *(
            Measurement(f"{ddir}_clat_{suffix}", float(nearest_rank(merged, pct)), "ns")
            for suffix, pct in PERCENTILES.items()
        ),
    ]


def _options(global_options: Mapping[str, Any], jobs: list[_Job]) -> dict[str, Any]:
    """The effective options: one mapping when all jobs share them, else one per job name.

    Only options given a value appear in fio's JSON: a bare `--time_based` or
    `norandommap` line is in effect but not listed (write `time_based=1`).
    """
    per_job = {
        _job_key(job, jobs): {**{str(k): str(v) for k, v in global_options.items()}, **job.options} for job in jobs
    }
    distinct = {json.dumps(options, sort_keys=True) for options in per_job.values()}
    return next(iter(per_job.values())) if len(distinct) == 1 else per_job


def _job_key(job: _Job, jobs: Iterable[_Job]) -> str:
    """The job's name, with '#index' when another job has the same name."""
    shared = sum(other.name == job.name for other in jobs) > 1
    return f"{job.name}#{job.index}" if shared else job.name


def _error(jobs: list[_Job]) -> str | None:
    """'job 'writer' (#1): errno 28, No space left on device', one clause per failed job."""
    failed = [
        f"job {job.name!r} (#{job.index}): errno {job.error}, {os.strerror(job.error)}" for job in jobs if job.error
    ]
    return "; ".join(failed) or None
