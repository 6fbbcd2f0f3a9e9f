"""Readers compared: samples/s of each PyTorch reader on tmpfs, and its syscalls per sample.

    sudo .venv/bin/python bench/loader_readers.py [--files 2000] [--workers 2] [--repeat 3]

The field report's comparison (PIL vs cv2.imread vs a whole-file read + cv2.imdecode
vs a packed file), on a private tmpfs so that storage is not the limit: what each
reader costs in CPU. Per reader, decode on (224×224, as ResNet-50 trains) and off
(bytes only): samples/s, MiB/s and CPU cores over the measured window (median of
--repeat runs, one epoch each, batches of 64, caches dropped before each run).
Then syscalls per sample, two ways:

- the reader alone: strace -c attached while one process reads 200 samples, minus
  what attaching costs (what the reader's own code does per file);
- the whole pipeline: the loader's own syscall profile (workers, queues, shared
  memory included), as a campaign with syscall_profile: true reports it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from _common import ROOT, drop_caches, loader_argv, private_tmpfs

from iolab.host.dataset.gen import gen
from iolab.host.dataset.pack import pack
from iolab.kinds.pytorch import parser as pytorch

READERS = ("pil", "cv2-imread", "cv2-imdecode", "packed")
CALLS = ("openat", "newfstatat", "lseek", "read", "pread64", "close")
MIB = 1 << 20


def run(root: Path, out: Path, reader: str, decode: bool, workers: int, *extra: str):
    drop_caches()
    subprocess.run(
        [
            *loader_argv(root, out),
            "--reader",
            reader,
            "--decode" if decode else "--no-decode",
            "--workers",
            str(workers),
            "--batch-size",
            "64",
            *extra,
        ],
        check=True,
        cwd=ROOT,
    )
    return pytorch.parse(out)


def reader_alone(root: Path, tmp: Path, reader: str, n: int = 200) -> dict[str, float]:
    from iolab.host.loader.readers import Samples
    from iolab.host.loader.syscalls import Tracer
    from iolab.shared.syscalls import parse_summary

    def traced(name: str, work) -> dict[str, int]:
        tracer = Tracer(tmp / f"{name}.txt", tmp / f"{name}.log")
        tracer.start()
        work()
        tracer.stop()
        return {c: row["calls"] for c, row in parse_summary((tmp / f"{name}.txt").read_text()).items()}

    samples = Samples(root, reader)
    samples[0]
    base = traced(f"{reader}-base", lambda: None)
    counts = traced(reader, lambda: [samples[i] for i in range(1, n + 1)])
    return {c: (counts.get(c, 0) - base.get(c, 0)) / n for c in CALLS}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    with private_tmpfs("iolab-readers", "1g") as mount:
        root = mount / "ds"
        manifest = gen(root, files=args.files, seed=1)
        pack(root, "packed")
        print(
            f"{args.files} files ({manifest.total_bytes / MIB:.0f} MiB) on tmpfs; {args.workers} workers, "
            f"batch 64, median of {args.repeat} runs"
        )
        print(f"{'reader':<13} {'decode':<6} {'samples/s':>10} {'MiB/s':>8} {'CPU cores':>9}")
        for decode in (True, False):
            for reader in READERS:
                if reader == "cv2-imread" and not decode:
                    continue
                found = []
                for rep in range(args.repeat):
                    parsed = run(root, mount / f"{reader}-{decode}-{rep}", reader, decode, args.workers)
                    found.append({m.metric: m.value for m in parsed.measurements if not m.params})
                med = {k: statistics.median(f[k] for f in found) for k in ("samples_per_s", "read_bw", "cpu_cores")}
                print(
                    f"{reader:<13} {'on' if decode else 'off':<6} {med['samples_per_s']:>10.0f} "
                    f"{med['read_bw'] / MIB:>8.1f} {med['cpu_cores']:>9.2f}"
                )
        print("\nsyscalls per sample, the reader alone (strace -c, 200 samples, attach cost subtracted):")
        print(f"{'reader':<13} " + " ".join(f"{c:>10}" for c in CALLS))
        for reader in READERS:
            per = reader_alone(root, mount, reader)
            print(f"{reader:<13} " + " ".join(f"{per[c]:>10.2f}" for c in CALLS))
        print("\nsyscalls per sample, the whole pipeline (syscall_profile: true, one epoch):")
        print(f"{'reader':<13} " + " ".join(f"{c:>10}" for c in CALLS) + f" {'total':>10}")
        for reader in READERS:
            parsed = run(root, mount / f"strace-{reader}", reader, True, args.workers, "--syscall-profile")
            per = {m.params["syscall"]: m.value for m in parsed.measurements if m.metric == "syscalls_per_sample"}
            print(f"{reader:<13} " + " ".join(f"{per.get(c, 0):>10.2f}" for c in CALLS) + f" {per['total']:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
