"""What every loader benchmark shares (stdlib only): the launcher, the step loop, loader.json.

The launcher starts one rank process per accelerator (as DLIO runs one MPI rank per
emulated accelerator), stops them all when one fails, and merges what each wrote
into RUN_DIR/loader.json. Each rank is a fork of the launcher, which first makes the
imports every rank needs (a loader's `preload`: torch's cost ≈ 3 s of CPU), so N ranks
pay for one import, not N: twelve ranks on two cores took 13–31 s to their first step
when each imported torch itself, 2–4 s forked. A rank runs `run_steps`: per batch it waits for the
batch (the time the training loop starved), computes (a sleep of the emulated
compute time, as DLIO does, or a real training step, whose backward pass all-reduces
the gradients of a data-parallel job) and records the times. Its measured window
runs from the end of its first step to the end of its last: the first batch pays for
starting the loader's workers and filling
its prefetch queue, a one-off cost that steady-state training does not pay again.
The CPU time of the rank's whole process tree (itself, its threads and its worker
processes, from /proc) is taken at both ends of the window.

The emulated compute sleeps in the training loop's thread, so the loader's own
per-batch cost in that thread (receiving the batch from a worker) adds to each
step, as it does in DLIO; a real GPU step overlaps it (kernels run asynchronously).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from iolab.host import gpu_telemetry
from iolab.host.loader.proctree import tree_cpu_seconds

KIND = "iolab.host.loader/1"
# Columns of loader.json's per-batch records.
COLUMNS = ("epoch", "step", "requested_at", "ready_at", "compute_s", "sync_s", "samples", "bytes")


def switch(p: argparse.ArgumentParser, flag: str, default: bool, help: str | None = None) -> None:
    """A --flag / --no-flag option."""
    p.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=help)


def parser(module: str, description: str, root: str, accelerators: tuple[str, ...]) -> argparse.ArgumentParser:
    """The flags every loader has (its own come after): the data set (`root` says where its samples are),
    loader.json's directory, the batches, epochs and steps, the accelerators, the syscall profile; the
    launcher gives each rank it starts --local-rank."""
    p = argparse.ArgumentParser(prog=f"python -m {module}", description=description, epilog=OPTIONS_HELP)
    p.add_argument("--root", type=Path, required=True, help=root)
    p.add_argument("--out", type=Path, required=True, help="directory that receives loader.json")
    p.add_argument("--batch-size", type=int, default=64)
    switch(p, "--shuffle", True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="at most this many batches per epoch and rank (0: all)")
    p.add_argument("--seed", type=int, default=0, help="shuffle seed")
    p.add_argument("--accelerator", choices=("none", *accelerators), default="none")
    p.add_argument("--compute-per-batch", type=float, default=0.0, help="emulated compute, seconds per batch")
    p.add_argument("--accelerators", type=int, default=1, help="rank processes on this host")
    switch(p, "--syscall-profile", False, "count syscalls with strace -c -f")
    switch(p, "--evict", True, "drop what was read from the page cache, so that every epoch reads the storage")
    p.add_argument("--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    return p


def _rank(run_rank: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> None:
    """A forked rank's body: its exit status is run_rank's."""
    sys.exit(run_rank(args))


def launch(module: str, args: argparse.Namespace, run_rank: Callable[[argparse.Namespace], int]) -> int:
    """Fork args.accelerators ranks (`run_rank` of the launcher's arguments with local_rank i), wait, merge
    loader.json."""
    args.out.mkdir(parents=True, exist_ok=True)
    if getattr(args, "master_port", None) == 0:  # one host's DDP job: a port free now, the same for every rank
        with socket.socket() as probe:
            probe.bind((args.master_addr, 0))
            args.master_port = probe.getsockname()[1]
    started = time.time()
    fork = multiprocessing.get_context("fork")
    procs = [
        fork.Process(target=_rank, args=(run_rank, argparse.Namespace(**{**vars(args), "local_rank": i})))
        for i in range(args.accelerators)
    ]
    for proc in procs:
        proc.start()

    def stop_all() -> None:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()

    def terminated(*_: Any) -> None:
        stop_all()
        sys.exit(143)

    signal.signal(signal.SIGTERM, terminated)
    failed = None
    while any(p.is_alive() for p in procs):
        for i, proc in enumerate(procs):
            if proc.exitcode and failed is None:  # None while it runs
                failed = (i, proc.exitcode)
                stop_all()  # one rank down: the others would wait for it forever
        time.sleep(0.1)
    failed = failed or next(((i, p.exitcode) for i, p in enumerate(procs) if p.exitcode), None)
    if failed is not None:
        print(f"loader rank {failed[0]} of this host exited {failed[1]}", file=sys.stderr)
        return 1
    ranks = []
    for path in sorted(args.out.glob("rank-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        ranks.append(json.loads(path.read_text()))
        path.unlink()
    first = ranks[0]
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "local_rank"}
    document = {
        "kind": KIND,
        "tool": module.rsplit(".", 1)[-1],
        "config": config,
        "columns": list(COLUMNS),
        "started_at": started,
        "ended_at": time.time(),
        "versions": first["versions"],
        "dataset": first["dataset"],
        "ranks": [{k: v for k, v in r.items() if k not in ("versions", "dataset")} for r in ranks],
    }
    write_json(args.out / "loader.json", document)
    return 0


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def drop_cached(fd: int, offset: int = 0, length: int = 0) -> None:
    """Drop from the page cache what was just read from `fd` (the whole file with length 0): one
    posix_fadvise(POSIX_FADV_DONTNEED), so the next read goes to storage. tmpfs keeps its pages."""
    os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


def drop_file(path: str) -> None:
    """drop_cached for a file a library read by its path (open, fadvise, close)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        drop_cached(fd)
    finally:
        os.close(fd)


def syscall_tracer(args: argparse.Namespace, rank: int) -> Any:
    """The rank's strace, started, when the workload asks for a syscall profile (stop() it); else None."""
    if not args.syscall_profile:
        return None
    from iolab.host.loader.syscalls import Tracer

    tracer = Tracer(args.out / f"strace-{rank}.txt", args.out / f"strace-{rank}.log")
    tracer.start()
    return tracer


def finish_rank(
    args: argparse.Namespace,
    rank: int,
    done: dict[str, Any],
    *,
    traced: bool,
    device: str,
    pin_memory: bool,
    compute_per_batch: float | None,
    **fields: Any,
) -> int:
    """Write rank-<rank>.json: what every loader says of a rank, its steps (`done`, from run_steps), then its
    own `fields`. 1 when the rank got no batch."""
    if not done["records"]:
        print(f"{args.root}: rank {rank} got no batch (its shard is empty)", file=sys.stderr)
        return 1
    result = {
        "rank": rank,
        "local_rank": args.local_rank,
        "replicas": args.accelerators,
        "pid": os.getpid(),
        "device": device,
        "pin_memory": pin_memory,
        "compute_per_batch": compute_per_batch,
        **done,
        "strace": f"strace-{rank}.txt" if traced else None,
        **fields,
    }
    write_json(args.out / f"rank-{rank}.json", result)
    return 0


def _say(records: list[list[float]], since: tuple[float, int], now: float) -> tuple[float, int]:
    """One status line on stdout for the person watching (iolab.host.live reads it): this rank's samples/s and AU
    since the last line. `since`: (when, records by then); returns the same for this line."""
    fresh = records[since[1] :]
    seconds = max(now - since[0], 1e-6)
    rate, au = sum(r[6] for r in fresh) / seconds, 100 * sum(r[4] for r in fresh) / seconds
    print(f"{STATUS} pid={os.getpid()} samples_per_s={rate:.1f} au_pct={au:.1f}", flush=True)
    return now, len(records)


def run_steps(
    epochs: int,
    steps: int,
    batches: Callable[[int], Iterator[Any]],
    size: Callable[[Any], tuple[int, int]],
    compute: Callable[[Any], None] | None,
    compute_per_batch: float,
) -> dict[str, Any]:
    """The training loop: `batches(epoch)` iterates an epoch; `size(batch)` is (samples, bytes).

    Returns the records (COLUMNS), per-epoch times, the measured window, and the CPU seconds of this process tree
    from the window's start to the end of the last epoch (its workers' ends included), with that span's wall
    (`cpu_s_over`): a window that ends at the last step would put the workers' shutdown over too short a wall
    (2.8 cores measured on a 2-core machine).
    """
    records: list[list[float]] = []
    per_epoch: list[dict[str, Any]] = []
    window: dict[str, float] = {}
    cpu_start, cpu_at = 0.0, time.time()
    said = (time.time(), 0)  # the last status line: when, records by then
    for epoch in range(epochs):
        epoch_start = time.time()
        iterator = batches(epoch)
        step = seen = 0
        while not steps or step < steps:
            requested = time.time()
            try:
                batch = next(iterator)
            except StopIteration:
                break
            ready = time.time()
            if compute is not None:
                compute(batch)
            elif compute_per_batch > 0:
                time.sleep(max(0.0, ready + compute_per_batch - time.time()))
            ended = time.time()
            samples, nbytes = size(batch)
            # sync_s stays 0: a data-parallel job's all-reduce is inside its step (DDP's backward pass)
            records.append([epoch, step, requested, ready, ended - ready, 0.0, samples, nbytes])
            if len(records) == 1:
                # The window opens once this snapshot (a walk of /proc) is taken: its cost is no step's.
                cpu_start = tree_cpu_seconds()
                window["start"] = cpu_at = time.time()
            step += 1
            seen += samples
            if ended - said[0] >= 1.0:
                said = _say(records, said, ended)
        per_epoch.append(
            {"epoch": epoch, "started_at": epoch_start, "ended_at": time.time(), "steps": step, "samples": seen}
        )
    window["end"] = records[-1][3] + records[-1][4] + records[-1][5] if records else time.time()
    window.setdefault("start", window["end"])
    cpu = tree_cpu_seconds() - cpu_start  # over its own wall (workers ending after the last step included)
    over = time.time() - cpu_at
    return {"records": records, "epochs": per_epoch, "window": window, "cpu_seconds": cpu, "cpu_s_over": over}


class GpuMonitor:
    """One GPU's utilization (%) and memory in use (B) every half second, through NVML (iolab.host.gpu_telemetry),
    while a rank runs; the parser keeps what falls inside the measured window (not the start-up).

    Nothing is spawned per sample. Without NVML or without that GPU, the samples stay empty
    and `absent` says why.
    """

    def __init__(self, index: int, nvml: Any = gpu_telemetry.NVML_MODULE):
        self.index = index
        self.samples: list[tuple[float, float]] = []  # (time, utilization %)
        self.memory: list[tuple[float, int]] = []  # (time, bytes in use)
        self.total: int | None = None
        self._nvml, handles, info = gpu_telemetry.open_nvml(nvml)
        self._handle = handles[index] if index < len(handles) else None
        self.absent = info.get("absent") or (None if self._handle is not None else f"NVML sees no GPU {index}")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> GpuMonitor:
        if self._handle is not None:
            self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            found = gpu_telemetry.read_gpu(self._nvml, self.index, self._handle)
            now = time.time()
            if found["util"] is not None:
                self.samples.append((now, found["util"]))
            if found["mem_used"] is not None:
                self.memory.append((now, found["mem_used"]))
                self.total = found["mem_total"]

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass

    def summary(self, name: str) -> dict[str, Any]:
        """What a rank's record says of its GPU: its name, the samples, the memory's size, or why there are none."""
        return {
            "name": name,
            "utilization": self.samples,
            "memory": self.memory,
            "memory_total": self.total,
            "absent": self.absent,
        }


def check_launch(args: argparse.Namespace) -> list[str]:
    """Problems with the launcher's numeric arguments, as sentences."""
    checks = [
        ("workers", getattr(args, "workers", 0), 0),
        ("batch-size", args.batch_size, 1),
        ("epochs", args.epochs, 1),
        ("accelerators", args.accelerators, 1),
        ("prefetch-factor", getattr(args, "prefetch_factor", 1), 1),
        ("nodes", getattr(args, "nodes", 1), 1),
        ("private-threads", getattr(args, "private_threads", 0), 0),
    ]
    problems = [f"--{name} must be at least {low}" for name, value, low in checks if value < low]
    if getattr(args, "gds", False):
        from iolab.host.loader.gds_reader import missing as gds_missing

        if args.reader != "npz":
            problems.append("--gds reads unet3d's NPZ files into the GPU: it needs --reader npz")
        problems.extend(filter(None, [gds_missing()]))
    if getattr(args, "reader", None) == "dali":
        from iolab.host.loader.dali_reader import missing

        if not args.decode:
            problems.append(
                "reader dali decodes the images: use --decode (decode: true), or another reader for bytes only"
            )
        problems.extend(filter(None, [missing()]))
    return problems


OPTIONS_HELP = (
    '--options JSON: the flags as one JSON object ({"batch_size": 400, "decode": false}), as the bench '
    "roles pass a workload's settings; flags after it win"
)


STATUS = "iolab-loader:"  # a rank's status line (run_steps), read by iolab.host.live


def options_argv(argv: list[str]) -> list[str]:
    """`--options JSON` (how the bench roles pass a workload's loader settings: one object, keys named as the
    loader's flags with `_` for `-`) → the flags it stands for, in its place: a flag given after it wins.
    true/false → `--name`/`--no-name`; null → left out (the loader's default). argparse then checks names,
    types and choices as for flags typed by hand."""
    out: list[str] = []
    rest = iter(argv)
    for arg in rest:
        if arg != "--options" and not arg.startswith("--options="):
            out.append(arg)
            continue
        text = arg.partition("=")[2] if "=" in arg else next(rest, "")
        try:
            options = json.loads(text)
        except ValueError as exc:
            raise SystemExit(f"--options: not JSON ({exc})") from None
        if not isinstance(options, dict):
            raise SystemExit("--options: a JSON object of option names and values is expected")
        for name, value in options.items():
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                out.append(flag if value else "--no-" + flag[2:])
            elif value is not None:
                out += [flag, str(value)]
    return out


def main(
    module: str,
    parser: Callable[[], argparse.ArgumentParser],
    run_rank: Callable[[argparse.Namespace], int],
    argv: list[str] | None = None,
    preload: Callable[[], None] | None = None,
) -> int:
    """A loader's command line: the launcher (no --local-rank) checks, makes the ranks' imports (`preload`)
    and forks the ranks; with --local-rank, one rank runs in this process (a test's or a profiler's)."""
    argv = options_argv(list(sys.argv[1:] if argv is None else argv))
    args = parser().parse_args(argv)
    if args.local_rank is None:
        problems = check_launch(args)
        if problems:
            print("; ".join(problems), file=sys.stderr)
            return 2
        if preload:
            preload()
        return launch(module, args, run_rank)
    return run_rank(args)
