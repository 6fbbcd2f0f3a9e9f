"""iolab's accelerator emulation against DLIO itself: the same workload, files and storage, both AUs side by side.

    sudo .venv/bin/python bench/dlio_agreement.py [--models unet3d,retinanet] [--accelerators 1,2,4]
                                                  [--steps 4] [--epochs 1] [--backend tmpfs|local:/path]

For each model, one campaign on this machine (`bench.all`, localhost): MLPerf Storage's preset
(`type: mlperf`, B200, lab scale) run twice at each accelerator count, once by iolab's loader
(engine iolab) and once by DLIO under mpirun (engine dlio, iolab.kinds.dlio.host), in that order, on
one data set on one backend, the caches dropped before each run. The data set holds --steps
steps of the largest count (accelerators × batch × steps files). Prints one line per model and
count: both AUs (%), their difference (points), both samples/s and their difference (%).

A difference above 3 AU points is to be explained from both codes (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _common import lab, samples, write_campaign

from iolab.shared.shapes import SHAPES
from iolab.units import human
from iolab.workloads.accelerator import reference_batch

ENGINES = ("iolab", "dlio")


def campaign(model: str, counts: list[int], steps: int, epochs: int, backend: dict) -> dict:
    files = max(counts) * reference_batch(model, "b200") * steps
    workloads = [
        {
            "name": f"{engine}-{n}",
            "type": "mlperf",
            "workload": model,
            "accelerator": "b200",
            "accelerators": n,
            "epochs": epochs,
            "lab_scale": True,
            "engine": engine,
        }
        for n in counts
        for engine in ENGINES
    ]
    dataset = {"kind": model, "files": files, "seed": 1, "classes": 4}
    return {"name": f"dlio-agreement-{model}", "backends": [backend], "dataset": dataset, "workloads": workloads}


def backend_of(spec: str, model: str, files: int) -> dict:
    if spec.startswith("local:"):
        return {"name": "bench-dlio", "type": "local", "path": spec.split(":", 1)[1]}
    mean, stdev, _ = SHAPES[model]
    size = int(files * (mean + 2 * stdev) * 1.1) + 64 * 2**20  # the largest files the generator makes, and room
    return {"name": "bench-dlio", "type": "tmpfs", "size": f"{size // 2**20}MiB"}


def figures(found: list[dict], name: str) -> tuple[float, float]:
    by_metric = {s["metric"]: s["value"] for s in found if s["workload"] == name and s["host"] != "*"}
    return by_metric["au"], by_metric["samples_per_s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="unet3d,retinanet")
    parser.add_argument("--accelerators", default="1,2,4", help="counts per host (default 1,2,4)")
    parser.add_argument("--steps", type=int, default=4, help="steps of the largest count in the data set")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--backend", default="tmpfs", help="tmpfs (sized for the data set) or local:/path")
    args = parser.parse_args()
    counts = [int(n) for n in args.accelerators.split(",")]
    results = Path(tempfile.mkdtemp(prefix="iolab-dlio-agreement-"))
    head = f"{'model':<10} {'acc':>3}  {'AU iolab':>9} {'AU DLIO':>9} {'diff':>7}"
    print(f"{head}   {'iolab':>12} {'DLIO':>12} {'diff':>7}")
    for model in args.models.split(","):
        files = max(counts) * reference_batch(model, "b200") * args.steps
        data = campaign(model, counts, args.steps, args.epochs, backend_of(args.backend, model, files))
        lab("bench.all", "--campaign", str(write_campaign(data)), results=results)
        found = samples(results, data["name"])
        for n in counts:
            (au_i, rate_i), (au_d, rate_d) = (figures(found, f"{engine}-{n}") for engine in ENGINES)
            aus = f"{au_i:>8.2f}% {au_d:>8.2f}% {au_i - au_d:>+6.2f}"
            rates = f"{human(rate_i, 'samples/s'):>12} {human(rate_d, 'samples/s'):>12}"
            rates += f" {100 * (rate_i / rate_d - 1):>+6.1f}%"
            print(f"{model:<10} {n:>3}  {aus}   {rates}")
    print(f"results: {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
