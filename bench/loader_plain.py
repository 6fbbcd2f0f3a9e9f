"""The loader's own cost: iolab's PyTorch loader against a plain multiprocessing loop doing the same work.

    sudo .venv/bin/python bench/loader_plain.py [--files 2000] [--size-kib 64] [--workers 2] [--rounds 3]

The plain loop is the loader's ceiling: N processes (N = the loader's workers), each
taking its share of a shuffled epoch and, per file, doing exactly what the loader's
pil reader does — with decode, PIL open and decode, convert to RGB, resize the centre
square to 224×224 (iolab.host.loader.decode.decode_pil, the reader's own function);
without decode, read the file's bytes (read_exact: one open, one read, one close).
No batches, no queues, no training loop. The loader runs as the other bench scripts
run it (its command line, its loader.json, the parser's samples/s over the measured
window): reader pil, the same workers, batch 64, decode on or off. Target:
loader / plain loop ≥ 0.95 with decode, ≥ 0.80 without.

The files are generated once on a private tmpfs (mounted here, unmounted at the end),
all of --size-kib KiB (0: the ImageNet-like size mix); caches are dropped before each
run. Without decode, a file is read in far less time than it is decoded, so those runs
read the set --bytes-epochs times (the plain loop as many) to last about a second.
Each round alternates loader and plain loop, decode on then off. The plain loop's
rate is its samples over the span from its first process's start to its last one's end.
CPU time per sample (the loader's whole process tree over its measured window; the
plain loop's processes, start to exit) tells the work apart from the machine's load.
Needs root (mount, drop_caches).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, drop_caches, loader_argv, private_tmpfs, spread

from iolab.host.dataset import gen as gen_module
from iolab.host.dataset.manifest import Manifest
from iolab.host.loader.decode import SIZE, decode_pil, read_exact
from iolab.kinds.pytorch import parser as pytorch

KIB = 1024
MIB = 1 << 20
BATCH = 64


def _plain_share(share: list[int], paths: list[str], sizes: list[int], decode: bool, start, results) -> None:
    """One process of the plain loop: its share of every epoch, one file after another."""
    start.wait()
    began = time.time()
    nbytes = 0
    for i in share:
        if decode:
            decode_pil(paths[i], SIZE)
            nbytes += sizes[i]
        else:
            nbytes += len(read_exact(paths[i], sizes[i]))
    results.put((began, time.time(), len(share), nbytes))


def plain(manifest: Manifest, root: Path, workers: int, decode: bool, epochs: int, seed: int) -> tuple[float, float]:
    """(samples/s, CPU seconds per sample) of the plain loop: `workers` processes, each its share of each
    shuffled epoch."""
    paths = [str(root / e.path) for e in manifest.entries]
    sizes = [e.size for e in manifest.entries]
    shares: list[list[int]] = [[] for _ in range(workers)]
    for epoch in range(epochs):
        order = list(range(len(paths)))
        random.Random(seed * 1000 + epoch).shuffle(order)
        for w in range(workers):
            shares[w] += order[w::workers]
    ctx = multiprocessing.get_context("fork")
    start, results = ctx.Barrier(workers), ctx.SimpleQueue()
    drop_caches()
    cpu = _children_cpu()
    procs = [ctx.Process(target=_plain_share, args=(share, paths, sizes, decode, start, results)) for share in shares]
    for proc in procs:
        proc.start()
    done = [results.get() for _ in procs]
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            sys.exit(f"a plain-loop process exited {proc.exitcode}")
    span = max(d[1] for d in done) - min(d[0] for d in done)
    count = sum(d[2] for d in done)
    return count / span, (_children_cpu() - cpu) / count


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def loader(root: Path, out: Path, workers: int, decode: bool, epochs: int, seed: int) -> tuple[float, float]:
    """(samples/s, CPU seconds per sample) of iolab's PyTorch loader, reader pil, batch 64, over its measured
    window (its whole process tree: training process and workers)."""
    drop_caches()
    subprocess.run(
        [
            *loader_argv(root, out),
            "--reader",
            "pil",
            "--decode" if decode else "--no-decode",
            "--workers",
            str(workers),
            "--batch-size",
            str(BATCH),
            "--epochs",
            str(epochs),
            "--seed",
            str(seed),
        ],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,  # the loader's status lines
    )
    value = {m.metric: m.value for m in pytorch.parse(out).measurements if not m.params}
    return value["samples_per_s"], value["cpu_cores"] / value["samples_per_s"]


def make_files(root: Path, files: int, size_kib: int) -> Manifest:
    """The data set: every file `size_kib` KiB (within 2%), or ImageNet's size mix for 0."""
    return gen_module.gen(root, files=files, seed=1, file_size=size_kib * KIB or None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--size-kib", type=int, default=64, help="every file's size in KiB (0: ImageNet's mix)")
    p.add_argument("--workers", type=int, default=2, help="loader workers = plain-loop processes")
    p.add_argument("--epochs", type=int, default=1, help="epochs of a decode run")
    p.add_argument("--bytes-epochs", type=int, default=20, help="epochs of a bytes-only run")
    p.add_argument("--rounds", type=int, default=3, help="alternations of loader and plain loop")
    args = p.parse_args()
    with private_tmpfs("iolab-plain", "2g") as mount:
        root = mount / "ds"
        manifest = make_files(root, args.files, args.size_kib)
        print(
            f"tmpfs {mount}: {args.files} JPEGs, mean {manifest.total_bytes / args.files / KIB:.1f} KiB; "
            f"{args.workers} workers / processes, batch {BATCH}, reader pil; decode runs {args.epochs} epoch(s), "
            f"bytes-only runs {args.bytes_epochs}; load average at start {os.getloadavg()[0]:.2f}"
        )
        print(
            f"{'round':>5}  {'decode':<6}  {'loader':>16}  {'plain loop':>16}  {'ratio':>6}  "
            f"{'CPU/sample loader':>17}  {'plain':>8}  {'load avg':>8}"
        )
        found: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for rnd in range(args.rounds):
            for decode in (True, False):
                epochs = args.epochs if decode else args.bytes_epochs
                out = mount / f"run-{rnd}-{decode}"
                if rnd % 2:  # alternate which goes first
                    base, base_cpu = plain(manifest, root, args.workers, decode, epochs, rnd)
                    rate, cpu = loader(root, out, args.workers, decode, epochs, rnd)
                else:
                    rate, cpu = loader(root, out, args.workers, decode, epochs, rnd)
                    base, base_cpu = plain(manifest, root, args.workers, decode, epochs, rnd)
                found[decode].append((rate, base))
                print(
                    f"{rnd:>5}  {'on' if decode else 'off':<6}  {rate:>8.0f} samples/s  {base:>8.0f} samples/s  "
                    f"{rate / base:>6.2f}  {cpu * 1e6:>14.0f} µs  {base_cpu * 1e6:>5.0f} µs  "
                    f"{os.getloadavg()[0]:>8.2f}",
                    flush=True,
                )
        print()
        for decode, target in ((True, 0.95), (False, 0.80)):
            pairs = found[decode]
            ratios = [rate / base for rate, base in pairs]
            print(
                f"decode {'on ' if decode else 'off'}: loader {statistics.median(r for r, _ in pairs):.0f} samples/s, "
                f"plain loop {statistics.median(b for _, b in pairs):.0f} samples/s; "
                f"loader / plain loop {spread(ratios)} (target ≥ {target:.2f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
