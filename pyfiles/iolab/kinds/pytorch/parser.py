"""loader.json (iolab.kinds.pytorch.host) on one host → samples/s, read bandwidth, latency, CPU, AU, syscalls.

Counted as MLPerf Storage counts them (DLIO 2.0.0's statscounter): the rates are what was
delivered — every sample of every step, the first steps' included, over the rank's whole
run, from the start of its first epoch to the end of its last step. AU leaves out each
epoch's first step: its compute, and its time (the epoch's measured span runs from the end
of its first step to the end of its last), since the first batch of an epoch pays for the
loader's start-up or its refill (DLIO: `total_time - proc[0]` per epoch). The steady-state
rate, over those spans only, is a second figure with its own name. A host's figures add up
its ranks (one per accelerator):

    samples_per_s         Σ ranks  samples / run                             samples/s (delivered)
    read_bw               Σ ranks  bytes read / run                          B/s (delivered)
    steady_samples_per_s  Σ ranks  samples / measured spans, first steps out  samples/s
    batch_latency_p50/99  nearest rank over the measured batches of every rank:   s
                          the time the training loop waited for the batch
    cpu_cores             Σ ranks  CPU time of the rank's process tree / its wall   cores
                          (from the end of its first step to its last epoch's end, workers' exits included)
    epoch_time            the slowest rank's epoch, one sample per epoch      s (params.epoch)
    au                    mean over ranks of 100 · compute time / measured spans   % (with an accelerator)
    gpu_util              mean of NVML's utilization in the window        % (GPU mode)
    gpu_mem_used          NVML's memory in use at its most in the window  B (GPU mode)
    syscalls_per_sample   calls of each syscall / samples loaded while traced   count (params.syscall)

The metadata says how long the figures are: `steps_per_rank`, the measured steps (first
steps out) of the rank with the fewest (MLPerf asks for at least 500), and each rank's
`first_batch_s`. syscalls_per_sample lists the syscalls made at least once per hundred
samples, and their sum as syscall "total".
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from iolab.parsers import BARS, LOWER, SUM, Measurement, Metric, Parsed, ParseError, load_json
from iolab.shared.syscalls import SummaryError, parse_summary

KIND = "iolab.host.loader/1"
_RARE = 0.01  # syscalls per sample below which a syscall is left out
# Besides the shared read_bw, cpu_cores and gpu_util (iolab.parsers.METRICS):
TOOLS = ("pytorch", "tensorflow")  # the tf loader writes the loader.json of every iolab loader

METRICS = (
    Metric(
        "samples_per_s",
        "samples/s",
        "delivered/s",
        hosts=SUM,
        judged=True,
        table=50,
        wins=True,
        headline=20,
        chart=BARS,
    ),
    Metric("steady_samples_per_s", "samples/s", "loaded/s, each epoch's first step left out", hosts=SUM),
    Metric(
        "au",
        "%",
        "accelerator utilization: compute over time, each epoch's first step out",
        judged=True,
        table=60,
        wins=True,
    ),
    Metric("batch_latency_p50", "s", "wait for a batch, median", LOWER),
    Metric("batch_latency_p99", "s", "wait for a batch, 99th percentile", LOWER),
    Metric("epoch_time", "s", "an epoch's time, slowest rank", LOWER),
    Metric("syscalls_per_sample", "count", "system calls per sample loaded (params.syscall)", LOWER),
)


def nearest_rank(values: list[float], percent: float) -> float:
    """The smallest value with at least ceil(percent/100 · N) of the N values at or below it."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent * len(ordered) / 100)) - 1]


def load(host_dir: Path, name: str = "loader.json") -> dict[str, Any]:
    path = Path(host_dir) / name
    document = load_json(path, "the loader")
    if not isinstance(document, dict) or document.get("kind") != KIND or not document.get("ranks"):
        raise ParseError(f"{path}: not a loader result (expected kind {KIND!r} with at least one rank)")
    return document


WHERE = ("root", "out", "node_rank", "master_addr", "master_port")  # loader flags that are not settings


def parse(host_dir: Path) -> Parsed:
    host_dir = Path(host_dir)
    document = load(host_dir)
    columns = document.get("columns", [])
    try:
        col = {name: columns.index(name) for name in COUNTED}
    except ValueError as exc:
        raise ParseError(f"{host_dir / 'loader.json'}: records lack a column ({exc})") from None
    ranks = [_rank(host_dir, rank, col) for rank in document["ranks"]]
    out = _measurements(host_dir, document, ranks, col)
    return Parsed(
        measurements=out,
        metadata=_metadata(document, ranks),
        series=_series(document["ranks"], col),
        window=_window(document["ranks"]),
    )


def _window(ranks: list[dict[str, Any]]) -> tuple[float, float]:
    """The host's measured window (epoch s): while every rank measured, else (ranks that did not overlap) from the
    first rank's start to the last one's end."""
    starts, ends = [r["window"]["start"] for r in ranks], [r["window"]["end"] for r in ranks]
    return (max(starts), min(ends)) if max(starts) < min(ends) else (min(starts), max(ends))


def _measurements(
    host_dir: Path, document: dict[str, Any], ranks: list[dict[str, Any]], col: dict[str, int]
) -> list[Measurement]:
    """The host's figures (the module's table) from its ranks' (`_rank`'s, whose latencies and cores this takes
    out; a rank's AU is None without an accelerator)."""
    latencies = [latency for r in ranks for latency in r.pop("latencies")]
    # Traced: every sample read while strace ran, batches prefetched past the last step included.
    traced_samples = sum(
        rank.get("samples_read") or sum(r[col["samples"]] for r in rank["records"]) for rank in document["ranks"]
    )
    out = [
        Measurement("samples_per_s", sum(r["samples"] / r["run_s"] for r in ranks), "samples/s"),
        Measurement("read_bw", sum(r["bytes"] / r["run_s"] for r in ranks), "B/s"),
        Measurement("steady_samples_per_s", sum(r["steady_samples_per_s"] for r in ranks), "samples/s"),
        Measurement("batch_latency_p50", nearest_rank(latencies, 50), "s"),
        Measurement("batch_latency_p99", nearest_rank(latencies, 99), "s"),
        Measurement("cpu_cores", sum(r.pop("cores") for r in ranks), "cores"),
    ]
    out += _epochs(document["ranks"])
    if document.get("config", {}).get("accelerator", "none") != "none":
        out.append(Measurement("au", statistics.fmean(r["au"] for r in ranks), "%"))
    else:
        for r in ranks:
            r["au"] = None
    gpu = _gpu_in_window(document["ranks"], "utilization")
    if gpu:
        out.append(Measurement("gpu_util", statistics.fmean(gpu), "%"))
    memory = _gpu_in_window(document["ranks"], "memory")
    if memory:
        out.append(Measurement("gpu_mem_used", max(memory), "B"))
    return out + _syscalls(host_dir, document["ranks"], traced_samples)


def _metadata(document: dict[str, Any], ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """What the figures were measured on: the data set, the loader's settings, the ranks' lines (their measured
    bytes taken out, summed), versions, the GPU, a real accelerator's training, the reader's facts."""
    dataset = document.get("dataset", {})
    metadata = {
        "dataset_manifest_hash": dataset.get("manifest_hash"),
        "dataset_samples": dataset.get("samples"),
        "dataset_bytes": dataset.get("bytes"),
        # in the measured steps (first steps out), every rank: what the caching rule weighs
        "bytes_read": sum(r.pop("measured_bytes") for r in ranks),
        # The loader's settings, every flag (a new one too) but where this host's files and peers are
        "loader": {k: v for k, v in document.get("config", {}).items() if k not in WHERE},
        "pin_memory_effective": document["ranks"][0].get("pin_memory"),
        "devices": sorted({r.get("device") for r in document["ranks"]}),
        "ranks": ranks,
        "versions": document.get("versions", {}),
        "first_step_excluded": True,  # each epoch's, from AU and the steady rate
        "steps_per_rank": min(r["steps"] for r in ranks),
        # What the loader read was dropped from the page cache after each read (None: a loader that did not say)
        "page_cache_evicted": document["ranks"][0].get("page_cache_evicted"),
    }
    first = document["ranks"][0]
    if first.get("gpu"):
        metadata["gpu_model"] = first["gpu"].get("name")
        metadata["gpu_memory_total"] = first["gpu"].get("memory_total")
        metadata["gpu_absent"] = first["gpu"].get("absent")
    if first.get("training"):  # a real accelerator's data-parallel job: each rank's parameters summed at its end
        metadata["training"] = {k: v for k, v in first["training"].items() if k != "checksum"}
        metadata["training"]["checksums"] = [r["training"]["checksum"] for r in document["ranks"]]
    if first.get("reader"):  # what the reader really did: DALI's decoder, kvikio's GPU-direct path or not
        metadata["reader_facts"] = first["reader"]
    return metadata


COUNTED = ("epoch", "requested_at", "ready_at", "compute_s", "sync_s", "samples", "bytes")  # the columns read


def _rank(host_dir: Path, rank: dict[str, Any], col: dict[str, int]) -> dict[str, Any]:
    """One rank's figures as MLPerf counts them (see the module's doc); the rank's measured `latencies`, `cores`
    and `measured_bytes` are taken out by parse, the rest is its line of the metadata's `ranks`."""
    records = rank["records"]

    def end(r: list[float]) -> float:
        return r[col["ready_at"]] + r[col["compute_s"]] + r[col["sync_s"]]

    by_epoch: dict[int, list[list[float]]] = {}
    for r in records:
        by_epoch.setdefault(int(r[col["epoch"]]), []).append(r)
    measured = [r for steps in by_epoch.values() for r in steps[1:]]
    span = sum(end(steps[-1]) - end(steps[0]) for steps in by_epoch.values())
    window = rank["window"]["end"] - rank["window"]["start"]
    if not measured or span <= 0 or window <= 0:
        raise ParseError(
            f"{host_dir / 'loader.json'}: rank {rank['rank']} has {len(records)} batch(es) in {len(by_epoch)} "
            "epoch(s); rates need at least 2 in an epoch (each epoch's first is left out of AU): raise steps or "
            "the data set's size"
        )
    epochs = rank.get("epochs") or [{"started_at": records[0][col["requested_at"]]}]
    samples = sum(r[col["samples"]] for r in measured)
    return {
        "rank": rank["rank"],
        "samples": sum(r[col["samples"]] for r in records),
        "bytes": sum(r[col["bytes"]] for r in records),
        "run_s": end(records[-1]) - epochs[0]["started_at"],
        "steady_samples_per_s": samples / span,
        "au": 100 * sum(r[col["compute_s"]] for r in measured) / span,
        "steps": len(measured),
        "first_batch_s": records[0][col["ready_at"]] - records[0][col["requested_at"]],
        "batches": len(records),
        "latencies": [r[col["ready_at"]] - r[col["requested_at"]] for r in measured],
        "cores": rank["cpu_seconds"] / (rank.get("cpu_s_over") or window),  # (older runs: the step window)
        "measured_bytes": sum(r[col["bytes"]] for r in measured),
    }


def _series(ranks: list[dict[str, Any]], col: dict[str, int]) -> dict[str, list[tuple[float, float]]]:
    """Per-second samples/s and B/s of the host (its ranks added), by batch arrival, whole seconds only.

    A point (t, v) covers (t - 1, t]; only seconds inside every rank's window count.
    """
    start = max(r["window"]["start"] for r in ranks)
    end = min(r["window"]["end"] for r in ranks)
    first, last = math.ceil(start) + 1, math.floor(end)
    if last < first:
        return {}
    samples = {t: 0.0 for t in range(first, last + 1)}
    volume = dict(samples)
    for rank in ranks:
        for record in rank["records"][1:]:
            t = math.ceil(record[col["ready_at"]])
            if t in samples:
                samples[t] += record[col["samples"]]
                volume[t] += record[col["bytes"]]
    return {"samples_per_s": sorted(samples.items()), "read_bw": sorted(volume.items())}


def _epochs(ranks: list[dict[str, Any]]) -> list[Measurement]:
    by_epoch: dict[int, float] = {}
    for rank in ranks:
        for epoch in rank.get("epochs", []):
            took = epoch["ended_at"] - epoch["started_at"]
            by_epoch[epoch["epoch"]] = max(by_epoch.get(epoch["epoch"], 0.0), took)
    return [Measurement("epoch_time", took, "s", {"epoch": epoch}) for epoch, took in sorted(by_epoch.items())]


def _gpu_in_window(ranks: list[dict[str, Any]], series: str) -> list[float]:
    """A GPU series' values (utilization %, memory B) inside each rank's measured window, every rank's."""
    values: list[float] = []
    for rank in ranks:
        gpu = rank.get("gpu")
        if not gpu:
            continue
        start, end = rank["window"]["start"], rank["window"]["end"]
        values += [v for t, v in gpu.get(series, []) if start <= t <= end]
    return values


def _syscalls(host_dir: Path, ranks: list[dict[str, Any]], samples: int) -> list[Measurement]:
    names = [r["strace"] for r in ranks if r.get("strace")]
    if not names:
        return []
    counts: dict[str, int] = {}
    for name in names:
        path = host_dir / name
        try:
            table = parse_summary(path.read_text())
        except FileNotFoundError:
            raise ParseError(f"{path}: missing, strace wrote no summary") from None
        except SummaryError as exc:
            raise ParseError(f"{path}: {exc}") from None
        for syscall, row in table.items():
            counts[syscall] = counts.get(syscall, 0) + row["calls"]
    out = [
        Measurement("syscalls_per_sample", calls / samples, "count", {"syscall": syscall})
        for syscall, calls in sorted(counts.items(), key=lambda kv: -kv[1])
        if calls / samples >= _RARE
    ]
    out.append(Measurement("syscalls_per_sample", sum(counts.values()) / samples, "count", {"syscall": "total"}))
    return out
