"""`./lab report --format mlperf` for the KV-cache workload: its table, and the kv_cache leaf of the v3.0 results tree.

MLPerf Storage v3.0 keeps a KV-cache run as one leaf of its results tree,
`<division>/<org>/results/<system>/kv_cache/<model>/run/<YYYYMMDD_HHMMSS>/`: the run's `summary.json`
(every option's figures over its trials, rule 6.3.4), a metadata file `kv_cache_<ts>_metadata.json`,
and each rank's result file under `option_<O>/trial_<T>/rank_<N>/` (rule 6.3.3.3). For every
backend and kvcache workload run under `mlperf: true`, this writes that leaf under the campaign's
results (`results/<campaign>/mlperf/`): the division is `closed` when no run broke a rule and `open`
otherwise (the metadata lists what each broke, by number), the organisation `iolab`, the system
the backend's name, the model the first option's, the timestamp the first trial's start (local
time, as the rules' timestamps are). The ranks' files are copied from the runs' raw files (kv-cache.py's
own under engine mlperf-kvcache; iolab's in its shape otherwise); ranks are numbered over the hosts.

    text(store, samples) → the KV-cache table (each option's trials reduced as the rules reduce them) and the
                           leaves written; '' without such a run
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from iolab.measures import validity
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample
from iolab.report.mlperf import pipe_table
from iolab.shared.kvcache_model import REFERENCE_MODELS
from iolab.units import printable
from iolab.workloads.mlperf import RULES

GIB = 1 << 30
COLUMNS = (
    "workload",
    "backend",
    "option",
    "model",
    "client nodes",
    "clients",
    "users per client",
    "trials",
    "read GiB/s",
    "write GiB/s",
    "storage tokens/s",
    "max-of-P95 read ms",
    "max-of-P95 write ms",
    "MLPerf rules broken",
)


def _runs(samples: list[Sample]) -> dict[tuple[str, str], dict[int, list[list[Sample]]]]:
    """(backend, workload) → option → its trials' samples, in repetition order: the kvcache runs under the rules."""
    kv_runs = {s.run_id for s in samples if s.metric == "kv_read_p95_max" and s.params.get("mlperf_rules")}
    by_run: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.run_id in kv_runs:
            by_run[s.run_id].append(s)
    out: dict[tuple[str, str], dict[int, list[list[Sample]]]] = defaultdict(lambda: defaultdict(list))
    for mine in sorted(by_run.values(), key=lambda run: run[0].repetition):
        params = mine[0].params
        out[(mine[0].backend, mine[0].workload)][int(params.get("option") or 0)].append(mine)
    return out


def _total(run: list[Sample], metric: str) -> float | None:
    found = [s.value for s in run if s.metric == metric and s.host == AGGREGATE_HOST]
    return found[0] if found else None


def _option(trials: list[list[Sample]]) -> dict[str, Any]:
    """An option's figures over its trials as rule 6.3.4 reduces them: means of the trials' sums, the most P95."""

    def mean(metric: str, scale: float = 1.0) -> float | None:
        values = [v for run in trials if (v := _total(run, metric)) is not None]
        return statistics.fmean(values) / scale if values else None

    def most(metric: str) -> float | None:
        values = [v for run in trials if (v := _total(run, metric)) is not None]
        return max(values) * 1000 if values else None

    hosts = [s for s in trials[0] if s.host != AGGREGATE_HOST and s.metric == "read_bw"]
    ranks = sum(len(s.metadata.get("kv_ranks", [])) for s in hosts)
    cpu_tier = [r["rank"] for s in hosts for r in s.metadata.get("kv_ranks", []) if r.get("storage_entries") == 0]
    return {
        "aggregated_read_bandwidth_gbps": mean("read_bw", GIB),
        "aggregated_write_bandwidth_gbps": mean("write_bw", GIB),
        "aggregated_avg_throughput_tokens_per_sec": mean("tokens_per_s"),
        "aggregated_storage_throughput_tokens_per_sec": mean("storage_tokens_per_s"),
        "aggregated_device_read_p95_ms": most("kv_read_p95_max"),
        "aggregated_device_write_p95_ms": most("kv_write_p95_max"),
        "rank_count": ranks,
        "trial_count": len(trials),
        "partial_failure": any((_total(run, "kv_errors") or 0) > 0 for run in trials),
        "cpu_tier_ranks": cpu_tier,
    }


def _broken(verdicts: validity.Verdicts, runs: list[list[Sample]]) -> dict[str, str]:
    """The MLPerf rules the runs break: flag → its first reason (each led by the rule's number)."""
    flags: dict[str, str] = {}
    for run in runs:
        for f in verdicts.of(run[0].run_id):
            if f.name in RULES:
                flags.setdefault(f.name, f.reason)
    return dict(sorted(flags.items()))


def _copy_ranks(store: ResultStore, trials: list[list[Sample]], into: Path) -> None:
    """Each trial's rank files, numbered over the hosts: option_<O>/trial_<T>/rank_<N>/."""
    for trial, run in enumerate(trials):
        hosts = sorted({s.host for s in run if s.host != AGGREGATE_HOST})
        number = 0
        for host in hosts:
            raw = store.raw_dir(run[0].run_id) / host
            for rank_dir in sorted(raw.glob("rank_*"), key=lambda p: int(p.name.split("_")[1])):
                target = into / f"trial_{trial}" / f"rank_{number}"
                target.mkdir(parents=True, exist_ok=True)
                for result in rank_dir.glob("kvcache_results_*.json"):
                    shutil.copyfile(result, target / result.name)
                number += 1


def _leaf(
    store: ResultStore, backend: str, workload: str, options: dict[int, list[list[Sample]]], broken: dict[str, str]
) -> tuple[Path, dict[str, Any]]:
    first = min((run for trials in options.values() for run in trials), key=lambda run: run[0].started_at)
    params = first[0].params
    started = dt.datetime.fromisoformat(first[0].started_at.replace("Z", "+00:00")).astimezone()
    stamp = started.strftime("%Y%m%d_%H%M%S")
    model = REFERENCE_MODELS.get(params.get("model", ""), str(params.get("model")))
    division = "open" if broken else "closed"
    leaf = store.dir / "mlperf" / division / "iolab" / "results" / backend / "kv_cache" / model / "run" / stamp
    if leaf.exists():
        shutil.rmtree(leaf)  # written again from the store, whole
    leaf.mkdir(parents=True)
    npernode, hosts = int(params.get("clients", 1)), len({s.host for s in first if s.host != AGGREGATE_HOST})
    figures = {str(o): {"option": o, **_option(trials)} for o, trials in sorted(options.items())}
    summary: dict[str, Any] = {
        "schema_version": "1.0",
        "run_datetime": stamp,
        "npernode": npernode,
        "host_count": hosts,
        "total_ranks": npernode * hosts,
        "trials_per_option": max(len(trials) for trials in options.values()),
        "options": figures,
        "partial_failure": any(o["partial_failure"] for o in figures.values()),
    }
    (leaf / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    settings = {str(o): trials[0][0].params for o, trials in options.items()}
    metadata = {
        "run_datetime": stamp,
        "command": "run",
        "benchmark_type": "kv_cache",
        "model": model,
        "num_processes": summary["total_ranks"],
        "parameters": settings,
        "division": division,
        "rules_broken": list(broken.values()),
        "iolab": {"campaign": store.dir.name, "backend": backend, "workload": workload},
    }
    (leaf / f"kv_cache_{stamp}_metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    for option, trials in options.items():
        _copy_ranks(store, trials, leaf / f"option_{option}")
    return leaf, summary


def text(store: ResultStore, samples: list[Sample]) -> str:
    """The KV-cache table and the leaves written; '' without a kvcache run under the rules."""
    found = _runs(samples)
    if not found:
        return ""
    verdicts = validity.assess(samples)
    rows, written = [], []
    for (backend, workload), options in found.items():
        broken = _broken(verdicts, [run for trials in options.values() for run in trials])
        leaf, summary = _leaf(store, backend, workload, options, broken)
        written.append(f"written: {leaf}")
        for option, figures in summary["options"].items():
            params = options[int(option)][0][0].params

            def shown(value: float | None, digits: int = 2) -> str:
                return "—" if value is None else f"{value:,.{digits}f}"

            rows.append(
                [workload, backend, option, str(params.get("model")), str(summary["host_count"])]
                + [str(summary["total_ranks"]), str(params.get("users")), str(figures["trial_count"])]
                + [shown(figures["aggregated_read_bandwidth_gbps"]), shown(figures["aggregated_write_bandwidth_gbps"])]
                + [shown(figures["aggregated_storage_throughput_tokens_per_sec"], 0)]
                + [shown(figures["aggregated_device_read_p95_ms"], 1)]
                + [shown(figures["aggregated_device_write_p95_ms"], 1)]
                + [", ".join(RULES[name].split(" ")[0] for name in broken) or "none"]
            )
    table = pipe_table("MLPerf Storage KV cache (its P95s the most over the trials)", COLUMNS, rows)
    return "\n".join([table, *map(printable, written)])
