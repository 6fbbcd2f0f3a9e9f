"""A run's raw files become samples: each host's, the aggregate over hosts, and the run's status records.

What a run measured on each host is stored as soon as the run ends (iolab.measures.samples), so an
interruption loses nothing already gathered; a write that fails marks the run not stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from iolab.campaign.model import Run
from iolab.errors import StoreError
from iolab.kinds.registry import parser_for
from iolab.measures import host_flags, metrics
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample, utc_iso
from iolab.parsers import SUM, Measurement, Parsed, ParseError, failure_message
from iolab.shared.protocol import START_JSON, STORAGE_DROP_JSON
from iolab.units import human


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _host_samples(
    run: Run, host: str, host_dir: Path, warmed_by: str | None = None, together: bool = False
) -> tuple[list[Sample], str | None, dict]:
    """Samples of one host and its per-second series, or the reason there are none."""
    error = _read_json(host_dir / "error.json")
    if error:
        return [], f"{error.get('task', 'a task')}: {failure_message(error.get('result', {}))}", {}
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
        # how late a host of a run on several may start before it is flagged (host_flags: start_skewed)
        **({"start_skew_max_s": run.workload.start_skew_max or host_flags.START_SKEW_MAX} if together else {}),
        # A fan-out run's common start (iolab.drive.fanout): the host every host waited for, those it started without
        "start": _read_json(host_dir / START_JSON) or None,
        "page_cache_growth_bytes": record.get("page_cache_after", 0) - record.get("page_cache_before", 0),
        "cache_state": "dropped" if dropped else f"warm: {warmed_by}" if warmed_by else "not dropped (cache: keep)",
        "caches_dropped_at": dropped.get("dropped_at"),
        # The storage side's hosts (inventory group ceph_osd), dropped before the run too (run.yml).
        "storage_cache_state": _read_json(host_dir / STORAGE_DROP_JSON) or "no storage hosts in the inventory",
        "job": _read_json(host_dir / "fio_job.json"),
        "profiling": record.get("profiling"),  # the profilers' files beside the run's (raw/)
    }
    # Host telemetry (telemetry.jsonl, when the run kept one): its summaries (over the tool's measured window,
    # where it names one) join the tool's samples,
    # and the potential-caching check puts its flags and evidence in every sample of the host.
    from iolab.parsers import telemetry

    telemetry_measurements, telemetry_metadata = telemetry.merge(host_dir, parsed.measurements, parsed.window)
    metadata.update(telemetry_metadata)
    started, ended = record.get("started_at", time.time()), record.get("ended_at", time.time())
    samples = [
        run_sample(run, host, m, (started, ended), {**run.params, **m.params}, metadata)
        for m in [*parsed.measurements, *telemetry_measurements]
    ]
    # The verdict on this host's run as recorded (the repeats rule needs the other
    # repetitions: reports add it); every sample of the host shares this metadata.
    flags, notes = host_flags.host_run_check(samples) if samples else ([], [])
    metadata["validity"] = {
        "valid": not any(f.blocking for f in flags),
        "flags": [f.name for f in flags],
        "reasons": [f.reason for f in flags] + notes,
    }
    return samples, None, parsed.series


def aggregate(per_host: dict[str, tuple[list[Sample], dict]]) -> list[Sample]:
    """Host "*": each metric made as the catalogue says (iolab.measures.metrics), from every host's sample of it.

    SUM: the metric added up over the hosts, over the window in which all of them ran: each
    host's value is its mean over the common window, from its per-second series (an interval
    counts when it lies inside the window); a tool without series falls back to the sum of the
    hosts' own means, and the metadata says which was used. Never a tool's own "all clients"
    line. A tool's own rule (the checkpoint's) gives the value and what the metadata adds.
    """
    window = _common_window([s for _, s in per_host.values()])
    run = [sample for samples, _ in per_host.values() for sample in samples]
    by_metric: dict[str, list[Sample]] = {}
    for sample in run:
        if metrics.of(sample.metric).hosts and not sample.params.get("syscall"):
            by_metric.setdefault(sample.metric, []).append(sample)
    out = []
    for metric, group in by_metric.items():
        if len(group) != len(per_host):
            continue
        rule = metrics.of(metric).hosts
        if rule == SUM:
            series = {host: s for host, (_, s) in per_host.items()}
            value, lo, hi, more = _summed(group, series, window)
        else:
            assert callable(rule)
            (value, more), lo, hi = rule(group, run), group[0].started_at, group[0].ended_at
        out.append(
            dataclasses.replace(
                group[0],
                host=AGGREGATE_HOST,
                value=value,
                started_at=lo,
                ended_at=hi,
                # "last_done": the host whose run ended last, the one the others waited for
                metadata={
                    "hosts": sorted(per_host),
                    "last_done": max(group, key=lambda s: s.ended_at).host,
                    "validity": _verdict(group),
                    **more,
                },
            )
        )
    return out


def _common_window(series: list[dict]) -> tuple[float, float] | None:
    """(start, end) of the seconds every host's series covers; None when a host has none."""
    starts = [min(t for points in s.values() for t, _ in points) - 1 for s in series if s]
    ends = [max(t for points in s.values() for t, _ in points) for s in series if s]
    return (max(starts), min(ends)) if len(starts) == len(series) and starts else None


def _summed(
    group: list[Sample], series: dict[str, dict], window: tuple[float, float] | None
) -> tuple[float, str, str, dict[str, Any]]:
    """The SUM rule: (value, start, end, what the metadata adds) of one metric over the hosts."""
    metric = group[0].metric
    in_window = [
        [v for t, v in series[s.host].get(metric, []) if window and t - 1 >= window[0] - 0.25 and t <= window[1] + 0.25]
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
    more = {"aggregate": method, "start_late_max_s": max(skews), "start_spread_s": max(skews) - min(skews)}
    return value, lo, hi, more


def _verdict(group: list[Sample]) -> dict[str, Any]:
    """The hosts' verdicts on one metric, as one: valid when every host's is."""
    verdicts = [s.metadata.get("validity") or {} for s in group]
    return {
        "valid": all(v.get("valid", True) for v in verdicts),
        "flags": list(dict.fromkeys(f for v in verdicts for f in v.get("flags", []))),
        "reasons": [r for v in verdicts for r in v.get("reasons", [])],
    }


# What the controller knew of a run each time it recorded it (a line each: a resume records a host's gap later),
# beside the run's files (raw/<run_id>/RECORDED): with the hosts' own files, all that the samples are made of, so
# that `results.reparse` makes them again.
RECORDED = "recorded.jsonl"


def record_run(
    store: ResultStore,
    run: Run,
    failed: dict[str, tuple[str, str]] | None,
    hosts: list[str],
    complete: bool = True,
    warmed_by: str | None = None,
) -> tuple[list[str], list[Sample]]:
    """Store a run's samples and per-host status; return the failures as sentences, and the samples.

    `failed`: each host the run failed on or could not reach, (the task, why) — runner.Result.failed_hosts;
    None: the run did not start. The aggregate (host "*") is made only when every host of the run ran it
    together (`complete`), never from a resume that filled one host's gap.
    """
    recorded = {
        "run": run.model_dump(mode="json"),
        "hosts": hosts,
        "failed": failed,
        "complete": complete,
        "warmed_by": warmed_by,
    }
    raw = store.raw_dir(run.run_id)
    with contextlib.suppress(OSError):  # without it the samples are stored all the same; only a reparse misses it
        raw.mkdir(parents=True, exist_ok=True)
        with (raw / RECORDED).open("a") as out:
            out.write(json.dumps(recorded) + "\n")
    failures, samples, errors = derive(run, raw, recorded)
    store_run(store, run, samples, errors)
    return failures, samples


def derive(run: Run, raw: Path, recorded: dict[str, Any]) -> tuple[list[str], list[Sample], dict[str, str | None]]:
    """A run's samples and each host's status (None: ok; else why it failed), from its files under `raw` and what
    was recorded with them (RECORDED); the failures as sentences."""
    per_host: dict[str, tuple[list[Sample], dict]] = {}
    errors: dict[str, str | None] = {}
    hosts, failed = recorded["hosts"], recorded["failed"]
    for host in hosts:
        error: str | None
        if failed is None:
            error = "the run did not start"
        elif host in failed:
            task, error = failed[host]
            own = _read_json(raw / host / "error.json")  # the run's, before a later phase's
            if own and own.get("task") != task:
                error = f"failed at task '{own.get('task')}': {failure_message(own.get('result', {}))}; then {error}"
        else:
            samples, error, series = _host_samples(
                run, host, raw / host, recorded["warmed_by"], together=len(hosts) > 1
            )
            if not error:
                per_host[host] = (samples, series)
        errors[host] = error
    failures = [f"{run.label()}: failed on {host}: {error}" for host, error in errors.items() if error]
    samples = [s for host_samples, _ in per_host.values() for s in host_samples]
    whole = bool(per_host) and not failures and recorded["complete"]
    if whole:
        samples += aggregate(per_host)
    if run.workload.faults:  # what its clients felt (iolab.parsers.faults), from the files the injector wrote
        samples += _faulted(run, raw, per_host, [s for s in samples if s.host == AGGREGATE_HOST] if whole else [])
    return failures, samples, errors


def _faulted(
    run: Run, raw: Path, per_host: dict[str, tuple[list[Sample], dict]], aggregated: list[Sample]
) -> list[Sample]:
    """A faulted run's figures on each host with samples, and on host "*" (`aggregated`: its samples, when it has
    them), each carrying the faults' record (metadata.faults)."""
    from iolab.parsers import faults

    record = faults.load(raw)
    if record is None:
        return []
    summary = record.summary()
    out: list[Sample] = []
    each = {host: faults.host_figures(record, raw / host, series) for host, (samples, series) in per_host.items()}
    for host, made in each.items():
        out += [_like(per_host[host][0][0], run, m, summary) for m in made if per_host[host][0]]
    if aggregated:
        made = faults.run_figures(record, [series for _, series in per_host.values()], list(each.values()))
        out += [_like(aggregated[0], run, m, summary) for m in made]
    return out


def _like(template: Sample, run: Run, m: Measurement, summary: dict[str, Any]) -> Sample:
    """A sample of `m`, with the context of a sample of the same host and run, and the faults' record."""
    return dataclasses.replace(
        template,
        metric=m.metric,
        value=m.value,
        unit=m.unit,
        params={**run.params, **m.params},
        metadata={**template.metadata, "faults": summary},
    )


def run_sample(
    run: Run, host: str, m: Measurement, span: tuple[float, float], params: dict[str, Any], metadata: dict[str, Any]
) -> Sample:
    """One value a run measured on a host (or host "*"), with the run's context: every sample iolab stores."""
    return Sample(
        campaign=run.campaign,
        run_id=run.run_id,
        repetition=run.repetition,
        host=host,
        backend=run.backend.name,
        workload=run.workload.name,
        metric=m.metric,
        value=m.value,
        unit=m.unit,
        started_at=utc_iso(span[0]),
        ended_at=utc_iso(span[1]),
        params=params,
        metadata=metadata,
    )


def store_run(store: ResultStore, run: Run, samples: list[Sample], errors: dict[str, str | None]) -> None:
    """Store a run's samples, then its status on each host (`errors`: host → why it failed there, or None).

    Samples that cannot be stored leave the run not done (StoreError): runs.jsonl says so where
    the disk still allows it, and a resume runs it again.

    The store's hook (the results index, and a server's publish: seconds) runs once, after both appends: a
    controller killed between the two (its samples stored, its status not: a resume, seeing the samples, never
    writes it) has only the second append's write and fsync to be killed in, no longer the hook's seconds.
    """
    with store.appending():
        try:
            store.add_samples(samples, f"the {len(samples)} samples of {run.label()}")
        except StoreError as exc:
            with contextlib.suppress(StoreError):
                store.add_run_records([run_record(run, host, f"samples not stored: {exc}") for host in errors])
            raise
        store.add_run_records(
            [run_record(run, host, error) for host, error in errors.items()], f"the status of {run.label()}"
        )


def run_record(run: Run, host: str, error: str | None) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "host": host,
        "backend": run.backend.name,
        "workload": run.workload.name,
        "repetition": run.repetition,
        "params": run.params,  # the point it was run at: a failed run has no sample that says it
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
    for metric in metrics.ordered("headline"):
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
