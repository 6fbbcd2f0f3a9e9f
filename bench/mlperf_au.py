"""MLPerf presets on this machine: data set generation rates, and AU of the unet3d preset against its analytic value.

    sudo .venv/bin/python bench/mlperf_au.py [--files 28] [--gen-mib 1024]

Generation: a `--gen-mib` MiB unet3d (NPZ) and cosmoflow (samples plus their TFRecord
copy) data set each, on a private tmpfs with every CPU, timed; the rate extrapolates to
10 GiB (the generator's cost is per byte: random bytes, NPZ or TFRecord framing, sha256).

AU: the unet3d preset exactly as `type: mlperf, workload: unet3d` runs it (npz reader,
its workers, batch 7, each accelerator's compute time) over a `--files` data set on a
private tmpfs. First the loader alone (no accelerator) gives its batch interval T over
the measured window (first step excluded); an emulated accelerator computing c per batch
then waits for a batch only when the loader is slower, so a step takes max(c, T) and

    AU = 100 · c / max(c, T)

Each accelerator's run is compared with that. Prints one line per case.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, private_tmpfs

from iolab.host.dataset.gen import gen
from iolab.host.dataset.shapes import SHAPES
from iolab.parsers import pytorch
from iolab.workloads.accelerator import COMPUTE_TIMES, REFERENCE_BATCHES
from iolab.workloads.mlperf import PRESETS


def loader(root: Path, out: Path, epochs: int, compute: float | None) -> dict[str, float]:
    """One run of the unet3d preset's loader; its parsed figures by metric."""
    reader = PRESETS["unet3d"].reader
    argv = [
        sys.executable,
        "-m",
        "iolab.host.loader.torch_loader",
        "--root",
        str(root),
        "--out",
        str(out),
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
    p.add_argument("--files", type=int, default=28, help="unet3d samples in the AU data set")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--gen-mib", type=int, default=1024, help="MiB per generation measurement (0: skip)")
    args = p.parse_args()
    mean = SHAPES["unet3d"][0]
    size = max(args.files * mean * 1.3, 2.6 * args.gen_mib * 2**20)
    with private_tmpfs("iolab-mlperf", f"{int(size / 2**20) + 512}m") as mount:
        if args.gen_mib:
            generation(mount, args.gen_mib)
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
        print(f"largest deviation: {worst:.1f} points (target: 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
