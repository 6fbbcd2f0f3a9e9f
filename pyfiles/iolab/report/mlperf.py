"""`./lab report --format mlperf`: a campaign's MLPerf workloads in the columns of MLPerf Storage's results.

MLPerf Storage reports a training result as the client nodes, the simulated accelerators (their
type and count) and the storage's read throughput, samples per second subject to the workload's
AU; a checkpointing result as the model, the client nodes, the processes and the write and read
throughput and duration of a checkpoint; each the mean of the measured runs (the submission
guidelines of the mlcommons/storage repository, "Metrics and Results Reporting" and "Performance
Metrics"; docs/REFERENCE_FIGURES.md). This module lays a lab's figures out the same way, one row
per workload point and backend, so that they sit beside published rows: every figure is the mean
of the point's stored runs (the warm-up is never stored), named so in the header, with the MLPerf
rules the runs break by number (iolab.measures.validity, workloads.mlperf.RULES).

    text(samples) → two pipe tables (training, checkpointing), GiB/s and s in their headers
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable

from iolab.errors import UserError
from iolab.measures import metrics, validity
from iolab.measures.samples import AGGREGATE_HOST, Sample
from iolab.parsers import SUM
from iolab.units import printable
from iolab.workloads.mlperf import RULES

GIB = 1 << 30
TRAINING = (
    "workload",
    "backend",
    "accelerator",
    "client nodes",
    "simulated accelerators",
    "read GiB/s",
    "samples/s",
    "lowest host AU %",
    "runs",
    "MLPerf Storage rules broken",
)
CHECKPOINTING = (
    "workload",
    "backend",
    "model",
    "client nodes",
    "processes",
    "write GiB/s",
    "read GiB/s",
    "write s",
    "read s",
    "runs",
    "MLPerf Storage rules broken",
)


def _run_value(samples: list[Sample], metric: str, combine=statistics.fmean) -> float | None:
    """One run's figure: its aggregate over hosts (host "*") where there is one; else (a resumed run that filled
    one host's gap has none) its hosts' figures added up as the catalogue adds them (summed, or the tool's own
    rule), or `combine`d for a metric that is not added up (AU: the lowest)."""
    mine = [s for s in samples if s.metric == metric and not s.params.get("syscall")]
    total = [s.value for s in mine if s.host == AGGREGATE_HOST]
    hosts = [s for s in mine if s.host != AGGREGATE_HOST]
    if total or len(hosts) < 2:
        return total[0] if total else hosts[0].value if hosts else None
    rule = metrics.of(metric).hosts
    if rule == SUM:
        return sum(s.value for s in hosts)
    if callable(rule):
        return rule(hosts, [s for s in samples if s.host != AGGREGATE_HOST])[0]
    return combine([s.value for s in hosts])


def mean_of_runs(runs: Iterable[list[Sample]], metric: str, combine=statistics.fmean) -> float | None:
    """MLPerf's result: the mean over the measured runs of each run's figure; None where no run has one."""
    values = [v for run in runs if (v := _run_value(run, metric, combine)) is not None]
    return statistics.fmean(values) if values else None


def points(samples: list[Sample]) -> dict[tuple[str, str, str], list[list[Sample]]]:
    """(workload, setting, backend) → its runs' samples, for the runs of MLPerf workloads."""
    common = validity.run_params(samples)
    runs: dict[str, list[Sample]] = defaultdict(list)
    kv_cache = {s.run_id for s in samples if s.metric == "kv_read_p95_max"}  # iolab.report.mlperf_kv's
    for s in samples:
        if (s.params.get("mlperf") or s.params.get("mlperf_rules")) and s.run_id not in kv_cache:
            runs[s.run_id].append(s)
    out: dict[tuple[str, str, str], list[list[Sample]]] = defaultdict(list)
    for run_id, mine in runs.items():
        out[(mine[0].workload, validity.setting_of(common[run_id]), mine[0].backend)].append(mine)
    return out


def _figure(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
    return "—" if value is None else f"{value / scale:,.{digits}f}"


def rows(samples: list[Sample]) -> tuple[list[list[str]], list[list[str]]]:
    """(training rows, checkpointing rows), in TRAINING's and CHECKPOINTING's columns."""
    verdicts = validity.assess(samples)
    training, checkpointing = [], []
    for (workload, _, backend), runs in points(samples).items():
        params = runs[0][0].params
        nodes = len({s.host for s in runs[0] if s.host != AGGREGATE_HOST})
        broken = sorted({rule for run in runs for f in verdicts.of(run[0].run_id) if (rule := _rule(f.name))})
        tail = [str(len(runs)), ", ".join(broken) or "none"]
        if "checkpoint_count" in runs[0][0].metadata:
            processes = sum(
                s.metadata["checkpoint"]["write"]["ranks"]
                for s in runs[0]
                if s.host != AGGREGATE_HOST and s.metric == "checkpoint_write_bw"
            )
            figures = [mean_of_runs(runs, f"checkpoint_{m}") for m in ("write_bw", "read_bw", "write_s", "read_s")]
            checkpointing.append(
                [workload, backend, str(params.get("model")), str(nodes), str(processes)]
                + [_figure(f, GIB) for f in figures[:2]]
                + [_figure(f) for f in figures[2:]]
                + tail
            )
        else:
            accelerator = params.get("accelerator") or {}
            per_host = int(params.get("accelerators", 1))
            training.append(
                [workload, backend, str(accelerator.get("type", "—")), str(nodes), str(per_host * nodes)]
                + [_figure(mean_of_runs(runs, "read_bw"), GIB), _figure(mean_of_runs(runs, "samples_per_s"), 1, 1)]
                + [_figure(mean_of_runs(runs, "au", min), 1, 1)]
                + tail
            )
    return training, checkpointing


def _rule(flag: str) -> str:
    return RULES.get(flag, "").split(" ")[0]


def pipe_table(title: str, columns: tuple[str, ...], body: list[list[str]]) -> str:
    lines = [f"{title} (each figure the mean of the point's measured runs)", "| " + " | ".join(columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    lines += ["| " + " | ".join(printable(cell) for cell in row) + " |" for row in body]
    return "\n".join(lines)


def text(samples: list[Sample], kv_cache: str = "") -> str:
    """The MLPerf-shaped tables of a campaign's samples, then `kv_cache` (iolab.report.mlperf_kv's); one line
    saying so when it has no MLPerf workload."""
    training, checkpointing = rows(samples)
    if not training and not checkpointing and not kv_cache:
        raise UserError(
            f"no MLPerf-Storage-style workload in this campaign ({len(samples)} samples; type: mlperf, dlio, or "
            "mlperf: true on a checkpoint or kvcache workload): nothing to lay out in MLPerf Storage's columns; use "
            "--format table"
        )
    parts = [pipe_table("MLPerf-Storage-style training", TRAINING, training)] if training else []
    if checkpointing:
        parts.append(pipe_table("MLPerf-Storage-style checkpointing", CHECKPOINTING, checkpointing))
    return "\n\n".join([*parts, *([kv_cache] if kv_cache else [])])
