"""Loader ceiling: the packed reader without decode vs fio's sequential read, same tmpfs, same workers.

    sudo .venv/bin/python bench/loader_ceiling.py [--files 2000] [--workers 1 2] [--epochs 5] [--runtime 5]

If the PyTorch loader itself cannot move bytes nearly as fast as fio on the fastest
storage there is, its results on real storage would measure the loader, not the
storage. Target: the packed reader, decode off, reaches at least 80% of
fio's sequential-read bandwidth on the same tmpfs with the same number of workers
(fio numjobs = DataLoader workers). The data set is generated on a private tmpfs
(mounted here, unmounted at the end), packed, then read by both: fio reads the
packed data file (1 MiB sequential reads, psync, buffered as the loader reads), the
loader reads it sample by sample (one pread each, shuffled, batches of 400 by default).
Prints MiB/s and the ratio per worker count; needs root (mount, drop_caches).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _common import ROOT, drop_caches, loader_argv, private_tmpfs

from iolab.host.dataset.gen import gen
from iolab.host.dataset.pack import pack
from iolab.kinds.pytorch import parser as pytorch

MIB = 1 << 20


def fio_read(path: Path, workers: int, runtime: float) -> float:
    out = subprocess.run(
        [
            "fio",
            "--name=seq",
            f"--filename={path}",
            "--rw=read",
            "--bs=1M",
            "--ioengine=psync",
            f"--numjobs={workers}",
            "--readonly",
            "--time_based",
            f"--runtime={runtime:g}",
            "--group_reporting",
            "--output-format=json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)["jobs"][0]["read"]["bw_bytes"]


def loader_read(root: Path, out: Path, workers: int, epochs: int, batch: int) -> tuple[float, float]:
    subprocess.run(
        [
            *loader_argv(root, out),
            "--reader",
            "packed",
            "--no-decode",
            "--workers",
            str(workers),
            "--batch-size",
            str(batch),
            "--epochs",
            str(epochs),
        ],
        check=True,
        cwd=ROOT,
    )
    parsed = pytorch.parse(out)
    value = {m.metric: m.value for m in parsed.measurements if not m.params}
    return value["read_bw"], value["samples_per_s"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=400, help="samples per batch (400: MLPerf's resnet50)")
    p.add_argument("--runtime", type=float, default=5.0)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    with private_tmpfs("iolab-ceiling", "2g") as mount:
        root = mount / "ds"
        gen(root, files=args.files, seed=1)
        info = pack(root, "packed")
        print(
            f"tmpfs {mount}: {args.files} files, packed data file {info.bytes / MIB:.0f} MiB; "
            f"loader batches of {args.batch_size}, {args.epochs} epochs; fio {args.runtime:g} s"
        )
        print(f"{'workers':>7}  {'fio seq read':>14}  {'loader (packed, no decode)':>28}  {'ratio':>6}")
        for workers in args.workers:
            for rep in range(args.repeat):
                drop_caches()  # tmpfs pages stay; dentries and the rest go, as before a run
                fio = fio_read(root / "packed" / "data.bin", workers, args.runtime)
                drop_caches()
                bw, rate = loader_read(root, mount / f"run-{workers}-{rep}", workers, args.epochs, args.batch_size)
                print(
                    f"{workers:>7}  {fio / MIB:>9.0f} MiB/s  {bw / MIB:>9.0f} MiB/s ({rate:>7.0f} samples/s)  "
                    f"{bw / fio:>6.2f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
