"""A run's raw files become samples: each host's, the aggregate over hosts, and the run's status records.

What a run measured on each host is stored as soon as the run ends (iolab.samples), so an
interruption loses nothing already gathered; a write that fails marks the run not stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from iolab import runner, validity
from iolab.campaign import Run
from iolab.parsers import Parsed, ParseError
from iolab.samples import AGGREGATE_HOST, ResultStore, Sample, StoreError, utc_iso
from iolab.units import human
from iolab.workloads import parser_for

# Metrics that add up across hosts into the aggregate (host "*").
ADDITIVE = (
    "read_bw",
    "write_bw",
    "read_iops",
    "write_iops",
    "samples_per_s",
    "stat_per_s",
    "open_per_s",
    "readdir_per_s",
)
HEADLINE = (
    "accelerators_fed",
    "samples_per_s",
    "read_bw",
    "write_bw",
    "read_iops",
    "stat_per_s",
    "checkpoint_write_bw",
)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _host_samples(
    run: Run, host: str, host_dir: Path, warmed_by: str | None = None
) -> tuple[list[Sample], str | None, dict]:
    """Samples of one host and its per-second series, or the reason there are none."""
    error = _read_json(host_dir / "error.json")
    if error:
        return [], f"{error.get('task', 'a task')}: {runner.failure_message(error.get('result', {}))}", {}
    record = _read_json(host_dir / "run.json")
    try:
        parsed: Parsed = parser_for(run.workload.tool)(host_dir)
    except ParseError as exc:
        return [], str(exc), {}
    if parsed.error:
        return [], parsed.error, {}
    dropped = _read_json(host_dir / "drop_caches.json")
    metadata = {
        **parsed.metadata,
        "host": record.get("facts", {}),
        "start_skew_s": record.get("start_skew_s"),
        "page_cache_growth_bytes": record.get("page_cache_after", 0) - record.get("page_cache_before", 0),
        "cache_state": "dropped" if dropped else f"warm: {warmed_by}" if warmed_by else "not dropped (cache: keep)",
        "caches_dropped_at": dropped.get("dropped_at"),
        # The storage side's hosts (inventory group ceph_osd), dropped before the run too (run.yml).
        "storage_cache_state": _read_json(host_dir / "storage_drop_caches.json") or "no storage hosts in the inventory",
        "job": _read_json(host_dir / "fio_job.json"),
        "profiling": record.get("profiling"),  # the profilers' files beside the run's (raw/)
    }
    # Host telemetry (telemetry.jsonl, when the run kept one): its summaries join the tool's samples,
    # and the potential-caching check puts its flags and evidence in every sample of the host.
    from iolab.parsers import telemetry

    telemetry_measurements, telemetry_metadata = telemetry.merge(host_dir, parsed.measurements)
    metadata.update(telemetry_metadata)
    started, ended = record.get("started_at", time.time()), record.get("ended_at", time.time())
    samples = [
        Sample(
            campaign=run.campaign,
            run_id=run.run_id,
            repetition=run.repetition,
            host=host,
            backend=run.backend.name,
            workload=run.workload.name,
            metric=m.metric,
            value=m.value,
            unit=m.unit,
            started_at=utc_iso(started),
            ended_at=utc_iso(ended),
            params={**run.params, **m.params},
            metadata=metadata,
        )
        for m in [*parsed.measurements, *telemetry_measurements]
    ]
    # The verdict on this host's run as recorded (the repeats rule needs the other
    # repetitions: reports add it); every sample of the host shares this metadata.
    flags, notes = validity.host_run_check(samples) if samples else ([], [])
    metadata["validity"] = {
        "valid": not any(f.blocking for f in flags),
        "flags": [f.name for f in flags],
        "reasons": [f.reason for f in flags] + notes,
    }
    return samples, None, parsed.series


def aggregate(per_host: dict[str, tuple[list[Sample], dict]]) -> list[Sample]:
    """Host "*": additive metrics added up over the hosts, over the window in which all of them ran.

    Each host's value is its mean over the common window, from its per-second series
    (an interval counts when it lies inside the window); a tool without series falls
    back to the sum of the hosts' own means, and the metadata says which was used.
    Never a tool's own "all clients" line.
    """
    series = {host: s for host, (_, s) in per_host.items()}
    starts = [min(t for points in s.values() for t, _ in points) - 1 for s in series.values() if s]
    ends = [max(t for points in s.values() for t, _ in points) for s in series.values() if s]
    window = (max(starts), min(ends)) if len(starts) == len(series) and starts else None
    by_metric: dict[str, list[Sample]] = {}
    for samples, _ in per_host.values():
        for sample in samples:
            if sample.metric in ADDITIVE and not sample.params.get("syscall"):
                by_metric.setdefault(sample.metric, []).append(sample)
    out = []
    for metric, group in by_metric.items():
        if len(group) != len(per_host):
            continue
        in_window = [
            [
                v
                for t, v in series[s.host].get(metric, [])
                if window and t - 1 >= window[0] - 0.25 and t <= window[1] + 0.25
            ]
            for s in group
        ]
        if window and all(in_window):
            value = sum(sum(vs) / len(vs) for vs in in_window)
            method = f"sum over hosts of each host's mean over the common {window[1] - window[0]:.0f} s window"
            lo, hi = utc_iso(window[0]), utc_iso(window[1])
        else:
            value = sum(s.value for s in group)
            method = "sum of the hosts' own means (no per-second series for a common window)"
            lo, hi = max(s.started_at for s in group), min(s.ended_at for s in group)
        skews = [s.metadata.get("start_skew_s") or 0.0 for s in group]
        out.append(
            dataclasses.replace(
                group[0],
                host=AGGREGATE_HOST,
                value=value,
                started_at=lo,
                ended_at=hi,
                metadata={
                    "hosts": sorted(per_host),
                    "aggregate": method,
                    "validity": _verdict(group),
                    "start_late_max_s": max(skews),
                    "start_spread_s": max(skews) - min(skews),
                },
            )
        )
    return out + _checkpoint_aggregate(per_host)


def _verdict(group: list[Sample]) -> dict[str, Any]:
    """The hosts' verdicts on one metric, as one: valid when every host's is."""
    verdicts = [s.metadata.get("validity") or {} for s in group]
    return {
        "valid": all(v.get("valid", True) for v in verdicts),
        "flags": list(dict.fromkeys(f for v in verdicts for f in v.get("flags", []))),
        "reasons": [r for v in verdicts for r in v.get("reasons", [])],
    }


def _checkpoint_aggregate(per_host: dict[str, tuple[list[Sample], dict]]) -> list[Sample]:
    """A checkpoint over every host: all of its bytes over the slowest rank of all (MLPerf's duration)."""
    out = []
    for phase in ("write", "read"):
        times = [s for samples, _ in per_host.values() for s in samples if s.metric == f"checkpoint_{phase}_s"]
        if not times or len(times) != len(per_host):
            continue
        slowest = max(s.value for s in times)
        moved = {key: sum(s.metadata["checkpoint"][phase][key] for s in times) for key in ("bytes", "ranks")}
        metadata = {
            "hosts": sorted(per_host),
            "validity": _verdict(times),
            "checkpoint": {phase: moved},
            "aggregate": "every host's bytes over the slowest rank of all hosts",
        }
        out += [
            dataclasses.replace(times[0], host=AGGREGATE_HOST, metric=metric, value=value, unit=unit, metadata=metadata)
            for metric, value, unit in (
                (f"checkpoint_{phase}_bw", moved["bytes"] / slowest, "B/s"),
                (f"checkpoint_{phase}_s", slowest, "s"),
            )
        ]
    return out


def record_run(
    store: ResultStore,
    run: Run,
    result: runner.Result | None,
    hosts: list[str],
    complete: bool = True,
    warmed_by: str | None = None,
) -> tuple[list[str], list[Sample]]:
    """Store a run's samples and per-host status; return the failures as sentences, and the samples.

    The aggregate (host "*") is made only when every host of the run ran it together
    (`complete`), never from a resume that filled one host's gap.
    """
    per_host: dict[str, tuple[list[Sample], dict]] = {}
    records, failures = [], []
    outcomes = result.hosts if result else {}
    for host in hosts:
        outcome = outcomes.get(host)
        error: str | None
        if outcome and (outcome.failed or outcome.unreachable):
            error = outcome.describe().split(": ", 1)[1]
            own = _read_json(store.raw_dir(run.run_id) / host / "error.json")  # the run's, before a later phase's
            if own and own.get("task") != outcome.task:
                error = (
                    f"failed at task '{own.get('task')}': {runner.failure_message(own.get('result', {}))}; then {error}"
                )
        elif result is None:
            error = "the run did not start"
        else:
            samples, error, series = _host_samples(run, host, store.raw_dir(run.run_id) / host, warmed_by)
            if not error:
                per_host[host] = (samples, series)
        records.append(run_record(run, host, error))
        if error:
            failures.append(f"{run.label()}: failed on {host}: {error}")
    samples = [s for host_samples, _ in per_host.values() for s in host_samples]
    if per_host and not failures and complete:
        samples += aggregate(per_host)
    try:
        store.add_samples(samples, f"the {len(samples)} samples of {run.label()}")
    except StoreError as exc:
        # Not stored, so not done: say so in runs.jsonl where the disk still allows it, then stop.
        with contextlib.suppress(StoreError):
            store.add_run_records([run_record(run, host, f"samples not stored: {exc}") for host in hosts])
        raise
    store.add_run_records(records, f"the status of {run.label()}")
    return failures, samples


def run_record(run: Run, host: str, error: str | None) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "host": host,
        "backend": run.backend.name,
        "workload": run.workload.name,
        "repetition": run.repetition,
        "status": "failed" if error else "ok",
        "error": error,
        "at": utc_iso(time.time()),
    }


def headline(samples: list[Sample], failures: list[str], hosts: list[str]) -> str:
    """A run's line: its aggregate; or, with samples from some of its `hosts` only, "2 of 4 hosts" and their range.

    A failure comes first, with what the other hosts measured after it.
    """
    measured = sorted({s.host for s in samples if s.host != AGGREGATE_HOST})
    line = "no samples"
    for metric in HEADLINE:
        aggregate = [s for s in samples if s.metric == metric and s.host == AGGREGATE_HOST]
        per_host = [
            s for s in samples if s.metric == metric and s.host != AGGREGATE_HOST and not s.params.get("syscall")
        ]
        if aggregate:
            line = f"{metric} {human(aggregate[0].value, aggregate[0].unit)}"
        elif per_host:
            low, high = min(s.value for s in per_host), max(s.value for s in per_host)
            value = human(low, per_host[0].unit) + ("" if low == high else f" to {human(high, per_host[0].unit)}")
            line = f"{len(measured)} of {len(hosts)} hosts ({', '.join(measured)}): {metric} {value} per host"
        if aggregate or per_host:
            break
    if not failures:
        return line
    return f"[red]failed[/] {failures[0]}" + (f"; {line}" if measured else "")
