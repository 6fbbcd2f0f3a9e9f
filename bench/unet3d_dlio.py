"""unet3d: iolab's emulation against DLIO 2.0.0 on the same NPZ files — samples/s, AU and memory per rank.

    sudo .venv/bin/python bench/unet3d_dlio.py [--files 42] [--epochs 2] [--ranks 1 2 3] [--repeat 1] [--no-dlio]
                                               [--dlio-trace]

A private tmpfs holds a lab-scale unet3d data set made by iolab's own generator
(`python -m iolab.host.dataset gen --kind unet3d`, one class folder: ≈146.6 MB per file),
so storage is never the limit and both tools pay only their CPU. Then, at each of --ranks, one
after the other (a pair):

- iolab's unet3d preset (the loader command its workload runs: reader npz, 4 workers, batch
  7, emulated H100 at 0.323 s per batch) at that many emulated accelerators;
- DLIO 2.0.0 itself, `mpirun --bind-to none -x DFTRACER_ENABLE=0 -np N dlio_benchmark workload=unet3d_h100`
  over the same files (its data_folder the data set's root, the files in its one subfolder), checkpointing
  off, untraced as engine dlio runs it (iolab.kinds.dlio.host.trace_env; --dlio-trace: pydftracer on, its default).

Each prints samples/s (iolab: delivered over the run; DLIO: its
train_throughput_mean_samples_per_second, the mean of its epochs' rates, which both print
too), AU, and the peak memory of each rank — the rank
process and its loader workers together, Σ PSS (shared pages split among the processes that
map them) and Σ RSS (shared pages counted in each) — and of the whole process tree, sampled
every 0.2 s from /proc, and the CPU seconds per sample of the whole run (every process of the
tool, its start-up included; DLIO's N ranks read files // (7 N) × 7 N samples an epoch, dropping each
rank's last partial batch): the figure a loaded machine moves least. Needs root (mount) and dlio_benchmark
with mpirun (the DL stack's dlio extra).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import ROOT, loader_argv, private_tmpfs

from iolab.kinds.dlio.host import trace_env
from iolab.kinds.pytorch import parser as pytorch

GIB = 1 << 30
# The unet3d preset's loader settings (iolab.workloads.mlperf PRESETS, accelerator h100).
PRESET = ["--reader", "npz", "--workers", "4", "--decode", "--batch-size", "7"]
PRESET += ["--accelerator", "emulated", "--compute-per-batch", "0.323"]


def _field(path: str, name: str) -> int:
    """A 'Name:  N kB' line of a /proc file, in bytes; 0 when the process is gone."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Memory:
    """Peak Σ PSS and Σ RSS of each rank's tree (a descendant of `top` whose command line holds `marker`; without
    a marker, each child of `top`: iolab's launcher forks its ranks) and of the whole tree under `top`, sampled
    every 0.2 s."""

    def __init__(self, top: int, marker: str | None):
        self.top, self.marker = top, marker
        self.ranks: dict[int, tuple[int, int]] = {}
        self.tree = (0, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _children(self) -> dict[int, list[int]]:
        children: dict[int, list[int]] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                ppid = _field(f"/proc/{name}/status", "PPid:") // 1024
                children.setdefault(ppid, []).append(int(name))
        return children

    def _sum(self, root: int, children: dict[int, list[int]]) -> tuple[int, int]:
        pss = rss = 0
        stack = [root]
        while stack:
            pid = stack.pop()
            pss += _field(f"/proc/{pid}/smaps_rollup", "Pss:")
            rss += _field(f"/proc/{pid}/status", "VmRSS:")
            stack.extend(children.get(pid, []))
        return pss, rss

    def _ranks(self, children: dict[int, list[int]]) -> list[int]:
        if self.marker is None:
            return list(children.get(self.top, []))
        found, stack = [], list(children.get(self.top, []))
        while stack:
            pid = stack.pop()
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if self.marker in command:
                found.append(pid)
            else:
                stack.extend(children.get(pid, []))
        return found

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            children = self._children()
            for pid in self._ranks(children):
                pss, rss = self._sum(pid, children)
                old = self.ranks.get(pid, (0, 0))
                self.ranks[pid] = (max(old[0], pss), max(old[1], rss))
            pss, rss = self._sum(self.top, children)
            self.tree = (max(self.tree[0], pss), max(self.tree[1], rss))

    def __enter__(self) -> Memory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def line(self) -> str:
        pss = max((p for p, _ in self.ranks.values()), default=0) / GIB
        rss = max((r for _, r in self.ranks.values()), default=0) / GIB
        return (
            f"peak per rank {pss:.2f} GiB PSS ({rss:.2f} GiB RSS), "
            f"whole tree {self.tree[0] / GIB:.2f} GiB PSS ({self.tree[1] / GIB:.2f} GiB RSS)"
        )


def run(argv: list[str], marker: str | None, cwd: Path | None = None) -> tuple[float, float, Memory]:
    """Run `argv`, its memory sampled; (wall seconds, CPU seconds of its whole tree, Memory). Exits on failure."""
    print("$", " ".join(argv), flush=True)
    cpu = _children_cpu()
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with Memory(proc.pid, marker) as memory:
        output, _ = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}):\n{output[-3000:]}")
    return time.monotonic() - started, _children_cpu() - cpu, memory


def _children_cpu() -> float:
    """User + system seconds of every descendant waited for so far (ranks and loader workers included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def iolab(root: Path, out: Path, ranks: int, epochs: int) -> None:
    argv = [*loader_argv(root, out), *PRESET, "--epochs", str(epochs), "--accelerators", str(ranks)]
    wall, cpu, memory = run(argv, None)
    parsed = pytorch.parse(out)
    value = {m.metric: m.value for m in parsed.measurements if m.metric != "epoch_time"}
    document = json.loads((out / "loader.json").read_text())
    epochs: dict[int, float] = {}  # samples/s of each epoch, ranks added (as DLIO reports it)
    for rank in document["ranks"]:
        for e in rank["epochs"]:
            epochs[e["epoch"]] = epochs.get(e["epoch"], 0.0) + e["samples"] / (e["ended_at"] - e["started_at"])
    print(
        f"iolab unet3d, {ranks} rank(s): {value['samples_per_s']:.2f} samples/s delivered "
        f"(steady {value['steady_samples_per_s']:.2f}; {_per_epoch(list(epochs.values()))}), AU {value['au']:.1f} %, "
        f"{parsed.metadata['steps_per_rank']} measured steps per rank, {memory.line()}, "
        f"CPU {cpu / sum(r['samples'] for r in parsed.metadata['ranks']):.3f} s per sample, wall {wall:.0f} s",
        flush=True,
    )


def _per_epoch(rates: list[float]) -> str:
    """Each epoch's samples/s and their mean: DLIO's figure is that mean, not the run's samples over its time."""
    return f"per epoch {', '.join(f'{r:.2f}' for r in rates)}, mean {sum(rates) / len(rates):.2f}"


def dlio(root: Path, files: int, epochs: int, ranks: int, trace: bool) -> None:
    work = Path(tempfile.mkdtemp(prefix="unet3d-dlio-"))
    try:
        # --bind-to none: Open MPI binds a job of one or two ranks to a core each by default, and the
        # DataLoader workers a rank forks inherit it: DLIO's 4 workers would share one core, iolab's two.
        argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", *trace_env(trace)]
        argv += ["-np", str(ranks), str(Path(sys.executable).parent / "dlio_benchmark"), "workload=unet3d_h100"]
        argv += [f"++workload.{key}={value}" for key, value in _dlio_settings(root, files, epochs, work).items()]
        wall, cpu, memory = run(argv, "dlio_benchmark", cwd=work)
        summary = json.loads((work / "out" / "summary.json").read_text())
        metric = summary["metric"]
        samples = epochs * (files // (7 * ranks)) * 7 * ranks  # each rank's whole batches of its share
        print(
            f"DLIO 2.0.0 unet3d{' traced' if trace else ''}, {ranks} rank(s): "
            f"{metric['train_throughput_mean_samples_per_second']:.2f} samples/s "
            f"({_per_epoch(metric['train_throughput_samples_per_second'])}), "
            f"AU {metric['train_au_mean_percentage']:.1f} %, {memory.line()}, "
            f"CPU {cpu / samples:.3f} s per sample, wall {wall:.0f} s",
            flush=True,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _dlio_settings(root: Path, files: int, epochs: int, work: Path) -> dict[str, object]:
    return {
        "workflow.generate_data": False,
        "workflow.train": True,
        "workflow.checkpoint": False,
        "dataset.data_folder": root,
        "dataset.num_files_train": files,
        "dataset.num_subfolders_train": 1,
        "train.epochs": epochs,
        "output.folder": work / "out",
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=42, help="NPZ files (≈146.6 MB each; the issue's run: 42)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 3], help="emulated accelerators (ranks)")
    p.add_argument("--dlio", action=argparse.BooleanOptionalAction, default=True, help="run DLIO 2.0.0 too")
    p.add_argument("--dlio-trace", action="store_true", help="DLIO with pydftracer's tracing on (its default)")
    p.add_argument("--repeat", type=int, default=1, help="rounds of pairs: iolab's run, then DLIO's, each count")
    p.add_argument("--tmpfs", default="", help="the tmpfs's size (default: 180 MB per file)")
    args = p.parse_args()
    size = args.tmpfs or f"{args.files * 180}m"
    with private_tmpfs("unet3d", size) as mount:
        root = mount / "ds"
        gen = [sys.executable, "-m", "iolab.host.dataset", "gen", str(root), "--kind", "unet3d"]
        gen += ["--files", str(args.files), "--seed", "1", "--classes", "1", "--workers", "2"]
        subprocess.run(gen, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        (root / "valid").mkdir()  # DLIO lists it (empty: no evaluation)
        for repetition in range(args.repeat):  # interleaved: a loaded machine's drift falls on both tools
            for ranks in args.ranks:
                print(f"load average {Path('/proc/loadavg').read_text().split()[0]}", flush=True)
                iolab(root, mount / f"iolab-{ranks}-{repetition}", ranks, args.epochs)
                if args.dlio:
                    dlio(root, args.files, args.epochs, ranks, args.dlio_trace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
