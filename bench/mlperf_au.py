"""MLPerf presets on this machine: data set generation rates, and AU of the unet3d preset against its analytic value.

    sudo .venv/bin/python bench/mlperf_au.py [--files 28] [--gen-mib 1024] [--repeat 2]

Generation: a `--gen-mib` MiB unet3d (NPZ) and cosmoflow (samples plus their TFRecord
copy) data set each, on a private tmpfs with every CPU, timed; the rate extrapolates to
10 GiB (the generator's cost is per byte: random bytes, NPZ or TFRecord framing, sha256).

AU, two ways, each accelerator's compute time c with the workload's batch (unet3d's 7, cosmoflow's 1):

- controlled (the ±2-point check): a loader of known speed — the packed reader over a
  small JPEG set on the tmpfs, bytes only, each sample sleeping p in one of 2 workers
  (DLIO's preprocess_time: 0.1 s for unet3d's batch of 7, 0.7 s for cosmoflow's of 1) —
  delivers a batch every T = batch · p / 2 = 0.35 s;
  a step takes max(c, T), so AU = 100 · c / max(c, T).
- the preset itself (`type: mlperf, workload: unet3d`: the npz reader and its workers) over
  a `--files` unet3d set on the tmpfs: the loader alone (no accelerator) gives its batch
  interval T over the measured window; then the same formula. On two cores the loader's
  speed moves from run to run with the machine's load, so this one is informational.

The first step is excluded, as MLPerf Storage does. Prints one line per case.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, loader_argv, private_tmpfs

from iolab.host.dataset.gen import gen
from iolab.host.dataset.pack import pack
from iolab.kinds.pytorch import parser as pytorch
from iolab.shared.shapes import SHAPES
from iolab.workloads.accelerator import COMPUTE_TIMES, REFERENCE_BATCHES
from iolab.workloads.mlperf import PRESETS

PRE = 0.1  # controlled case: seconds slept per sample
WORKERS = 2
STEADY = 12.0  # seconds of steady state per controlled run: the batches prefetched during the first step weigh less


def controlled(root: Path, out: Path, compute: float, workload: str = "unet3d") -> float:
    """AU of the controlled case (packed reader, bytes only, WORKERS workers) with `workload`'s batch; each
    sample sleeps as long as makes a batch every PRE · 7 / WORKERS seconds (unet3d's: PRE per sample)."""
    batch = REFERENCE_BATCHES[workload]
    pre = _pre(workload)
    period = max(compute, batch * pre / WORKERS)
    argv = [
        *loader_argv(root, out),
        "--reader",
        "packed",
        "--no-decode",
        "--workers",
        str(WORKERS),
        "--batch-size",
        str(batch),
        "--steps",
        str(max(8, int(STEADY / period))),
        "--accelerator",
        "emulated",
        "--compute-per-batch",
        str(compute),
        "--preprocess-time",
        str(pre),
    ]
    subprocess.run(argv, check=True, cwd=ROOT)
    return next(m.value for m in pytorch.parse(out).measurements if m.metric == "au")


def _pre(workload: str) -> float:
    """Seconds slept per sample so that a batch of `workload` takes as long as one of unet3d's at PRE."""
    return PRE * REFERENCE_BATCHES["unet3d"] / REFERENCE_BATCHES[workload]


def loader(root: Path, out: Path, epochs: int, compute: float | None) -> dict[str, float]:
    """One run of the unet3d preset's loader; its parsed figures by metric."""
    reader = PRESETS["unet3d"].reader
    argv = [
        *loader_argv(root, out),
        "--reader",
        reader["reader"],
        "--workers",
        str(reader["workers"]),
        "--batch-size",
        str(REFERENCE_BATCHES["unet3d"]),
        "--epochs",
        str(epochs),
    ]
    if compute is not None:
        argv += ["--accelerator", "emulated", "--compute-per-batch", str(compute)]
    subprocess.run(argv, check=True, cwd=ROOT)
    return {m.metric: m.value for m in pytorch.parse(out).measurements if not m.params}


def generation(mount: Path, mib: int) -> None:
    for kind, (mean, _, _) in SHAPES.items():
        files = max(2, mib * 2**20 // mean)
        started = time.perf_counter()
        manifest = gen(mount / f"gen-{kind}", files=files, seed=1, kind=kind)
        seconds = time.perf_counter() - started
        rate = manifest.total_bytes / seconds
        print(
            f"gen {kind}: {files} files, {manifest.total_bytes / 2**20:.0f} MiB in {seconds:.1f} s "
            f"({rate / 2**20:.0f} MiB/s of samples); 10 GiB ≈ {10 * 2**30 / rate:.0f} s (extrapolated)"
        )
        subprocess.run(["rm", "-rf", str(mount / f"gen-{kind}")], check=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=28, help="unet3d samples for the preset's own case (0: skip it)")
    p.add_argument("--repeat", type=int, default=2, help="runs of each controlled case")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--gen-mib", type=int, default=1024, help="MiB per generation measurement (0: skip)")
    p.add_argument(
        "--workloads", nargs="+", default=["unet3d", "cosmoflow"], help="whose batch and compute times to check"
    )
    args = p.parse_args()
    mean = SHAPES["unet3d"][0]
    size = max(args.files * mean * 1.3, 2.6 * args.gen_mib * 2**20)
    with private_tmpfs("iolab-mlperf", f"{int(size / 2**20) + 512}m") as mount:
        if args.gen_mib:
            generation(mount, args.gen_mib)
        small = mount / "jpeg"
        gen(small, files=400, seed=1)
        pack(small, "packed")
        worst = 0.0
        for workload in args.workloads:
            interval = REFERENCE_BATCHES[workload] * _pre(workload) / WORKERS
            for kind, seconds in COMPUTE_TIMES[workload].items():
                for rep in range(args.repeat):
                    au = controlled(small, mount / f"controlled-{workload}-{kind}-{rep}", seconds, workload)
                    want = 100 * seconds / max(seconds, interval)
                    worst = max(worst, abs(au - want))
                    print(
                        f"controlled {workload} {kind}: batch {REFERENCE_BATCHES[workload]}, c {seconds:g} s, "
                        f"T {interval:g} s, analytic AU {want:.1f} %, measured {au:.1f} %, diff {au - want:+.1f}",
                        flush=True,
                    )
        print(f"controlled, largest deviation: {worst:.1f} points (target: 2)")
        if not args.files:
            return 0
        root = mount / "unet3d"
        gen(root, files=args.files, seed=1, kind="unet3d")
        alone = loader(root, mount / "alone", args.epochs, None)
        interval = REFERENCE_BATCHES["unet3d"] / alone["samples_per_s"]
        print(f"unet3d loader alone: {alone['samples_per_s']:.2f} samples/s, a batch every {interval:.3f} s")
        worst = 0.0
        for kind, seconds in COMPUTE_TIMES["unet3d"].items():
            au = loader(root, mount / f"au-{kind}", args.epochs, seconds)["au"]
            want = 100 * seconds / max(seconds, interval)
            worst = max(worst, abs(au - want))
            print(
                f"unet3d {kind}: c {seconds:g} s, analytic AU {want:.1f} %, measured {au:.1f} %, diff {au - want:+.1f}"
            )
        print(f"preset on unet3d data, largest deviation: {worst:.1f} points (informational)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
