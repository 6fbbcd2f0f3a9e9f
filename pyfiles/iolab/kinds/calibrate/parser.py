"""calibration.json (iolab.kinds.calibrate.host) on one host → the step time and samples/s of each model and batch.

    step_time         the median block's seconds per step          s
    step_time_spread  (slowest block − fastest) / median            %
    samples_per_s     batch / step_time: the synthetic ceiling      samples/s

A run is one model at one batch (its params say which). The metadata keeps the device
(GPU model and count, driver, torch and CUDA versions, or the CPU's model and cores),
the settings and each entry whole: what iolab.run.calibration
writes as the host's accelerator profile.
"""

from __future__ import annotations

from pathlib import Path

from iolab.parsers import LOWER, Measurement, Metric, Parsed, ParseError, load_json

KIND = "iolab.calibration/1"
TOOLS = ("calibrate",)

METRICS = (
    Metric("step_time", "s", "a training step, the batch on the device (median block)", LOWER, table=70),
    Metric("step_time_spread", "%", "slowest timed block against the fastest, of the median", LOWER),
)


def load(host_dir: Path) -> dict:
    path = Path(host_dir) / "calibration.json"
    document = load_json(path, "the calibration")
    if document.get("kind") != KIND or not document.get("entries") or "device" not in document:
        raise ParseError(f"{path}: not a calibration (expected kind {KIND!r} with a device and entries)")
    return document


def parse(host_dir: Path) -> Parsed:
    document = load(host_dir)
    out = []
    for entry in document["entries"]:
        out += [  # one entry: a run is one model at one batch (the run's params say which)
            Measurement("step_time", entry["step_s"], "s"),
            Measurement("step_time_spread", entry["spread_pct"], "%"),
            Measurement("samples_per_s", entry["samples_per_s"], "samples/s"),
        ]
    return Parsed(out, {"calibration": document})
