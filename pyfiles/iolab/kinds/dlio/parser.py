"""DLIO's results on one host (`engine: dlio`, iolab.kinds.dlio.host) → AU, samples/s and read bandwidth.

Each of DLIO's ranks writes <rank>_output.json in its host's run directory; the first host also
gets the job's summary.json. A host's figures are its ranks', counted as DLIO 2.0.0's
statscounter counts them (end_train, end_run):

    au             mean over the host's ranks of each rank's AU: per epoch, its blocks'
                   (the steps between checkpoints) weighted by their steps, then the mean
                   over epochs                                                   %
    samples_per_s  Σ ranks  the rank's throughput, weighted and averaged alike   samples/s
    read_bw        samples_per_s × the data set's mean file size (DLIO's record_length,
                   as its "I/O Throughput" counts)                               B/s

DLIO's own job-wide figures (summary.json: the mean over epochs of every rank's) are kept in the
first host's metadata (`dlio_summary`). The metrics are the loaders' (iolab.kinds.pytorch.parser):
DLIO's figures meet iolab's in the same rows of the report.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from iolab.parsers import Measurement, Parsed, ParseError, load_json

TOOLS = ("dlio",)  # a pytorch workload with engine: dlio

METRICS = ()  # au, samples_per_s: iolab.kinds.pytorch.parser's; read_bw: iolab.parsers'
WORKLOAD_FILE = "dlio/workload/iolab.yaml"  # iolab.kinds.dlio.host's: JSON, which is YAML
INFO_FILE = "dlio/iolab.json"  # iolab.kinds.dlio.host's: the DLIO that ran


def _weighted(epoch: dict[str, Any], key: str) -> float:
    """An epoch's figure over its blocks, weighted by each block's steps (DLIO's end_train)."""
    blocks = {name: value for name, value in epoch.get(key, {}).items() if name.startswith("block")}
    steps = {name: len(epoch.get("proc", {}).get(name, [])) for name in blocks}
    total = sum(steps.values())
    return sum(blocks[name] * steps[name] for name in blocks) / total if total else 0.0


def rank_figures(path: Path) -> dict[str, Any]:
    """One rank's AU (%) and samples/s, each the mean over its epochs, and its steps."""
    document = load_json(path, "DLIO")
    epochs = [document[k] for k in sorted(document, key=lambda k: int(k) if k.isdigit() else 0) if k.isdigit()]
    if not epochs or not all(isinstance(e, dict) and "au" in e for e in epochs):
        raise ParseError(f"{path}: not a DLIO rank's result (no epoch with an AU)")
    return {
        "rank": int(path.name.split("_", 1)[0]),
        "au": statistics.fmean(_weighted(e, "au") for e in epochs),
        "samples_per_s": statistics.fmean(_weighted(e, "throughput") for e in epochs),
        "epochs": len(epochs),
        "steps": sum(len(steps) for e in epochs for steps in e.get("proc", {}).values()),
    }


def _summary(host_dir: Path) -> dict[str, Any] | None:
    path = host_dir / "summary.json"
    if not path.exists():
        return None
    document = load_json(path, "DLIO")
    metric = document.get("metric", {})
    return {
        "au_percent": metric.get("train_au_mean_percentage"),
        "samples_per_s": metric.get("train_throughput_mean_samples_per_second"),
        "io_MB_per_s": metric.get("train_io_mean_MB_per_second"),
        "au_meets_expectation": metric.get("train_au_meet_expectation"),
        "accelerators": document.get("num_accelerators"),
        "hosts": document.get("num_hosts"),
        "epochs": document.get("epochs"),
    }


def parse(host_dir: Path) -> Parsed:
    host_dir = Path(host_dir)
    config = load_json(host_dir / WORKLOAD_FILE, "the run's prepare (iolab.kinds.dlio.host.write_config)")
    paths = sorted(host_dir.glob("*_output.json"), key=lambda p: p.name)
    if not paths:
        raise ParseError(f"{host_dir}: no DLIO rank wrote its result (<rank>_output.json)")
    ranks = [rank_figures(p) for p in paths]
    samples_per_s = sum(r["samples_per_s"] for r in ranks)
    record_length = config.get("dataset", {}).get("record_length", 0)
    out = [
        Measurement("au", statistics.fmean(r["au"] for r in ranks), "%"),
        Measurement("samples_per_s", samples_per_s, "samples/s"),
        Measurement("read_bw", samples_per_s * record_length, "B/s"),
    ]
    info = load_json(host_dir / INFO_FILE, "the run's prepare (iolab.kinds.dlio.host.write_config)")
    metadata = {
        "engine": "dlio",
        "dlio_version": info.get("dlio_version"),
        "dlio_workload": config,  # the workload file its ranks on this host ran
        "ranks": ranks,
        "dlio_summary": _summary(host_dir),
        "first_step_excluded": True,  # DLIO's AU leaves each block's first step out
    }
    return Parsed(measurements=out, metadata=metadata)
