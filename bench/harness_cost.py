"""The harness's cost on localhost, whole `./lab bench.all` commands (the hosts set up by a first, unmeasured call):

    .venv/bin/python bench/harness_cost.py [--rounds 2] [--name fanlocal]
                                           [--backend tmpfs|rbd|rbd_snapshot|cephfs|local]
                                           [--kind fio|pytorch|tensorflow|checkpoint|replay|metadata]
                                           [--kind kvcache|calibrate|dlio]
                                           [--checkout DIR]

(a) one fio run of 2 s + 1 s ramp on a 256 MiB tmpfs (/mnt/iolab/NAME-mem): the command's wall time;
(b) a campaign of 6 runs of 5 s + 1 s ramp on a 1 GiB tmpfs (3 fio profiles × 2 repetitions): Σ(runtime + ramp) / wall.
--kind pytorch (or tensorflow): a loader's instead, one epoch of a 256-file data set on a 256 MiB tmpfs (the data
set made by the command's dataset phase): (a) one run: its harness, the wall less the loader's own time (its
run.json's ended_at - started_at); (b) 4 runs of it in one batch: the mean time between one run's loader ending and
the next one's starting (run.json's), the per-run cost between runs. --kind checkpoint: the same for a checkpoint
(63 MB of llama3-8b's, 2 writers, no data set), its time from its write's start to its read's end; --kind replay: a
trace's replay (2,000 reads of 4 KiB, as fast as the storage allows, its files staged by the run's prepare); --kind
metadata: the data set's tree walked, stat'd and opened (2 threads); --kind kvcache: 2 users' KV-cache entries for
2 s (no data set); --kind calibrate: one real training
step of the tiny ResNet-50 on this CPU, timed (no data set); --kind dlio: DLIO itself under mpirun (one rank, 32
of retinanet's JPEGs), its time mpirun's, DLIO's start-up included.
--backend rbd, rbd_snapshot or cephfs: fio's runs on a Ceph backend of a lab in a box of this machine's own
(tests/labbox.py: real Ceph, up for the bench and torn down after; needs root), whose storage side (the OSDs' caches)
each run drops too (rbd_snapshot: its snapshot loaded by the first, unmeasured command); (b) then says the time
between runs as well. --kind objects takes --backend s3: the box's radosgw. --backend local, for a loader: its
runs on a local backend, a directory of the bench's own on this machine's disk (its steps: the directory checked,
iolab's files removed at the end).
--checkout: run another checkout's code
(its tasks and pyfiles, this virtualenv): a before figure from a worktree of an earlier commit.
Each call stores into a fresh results directory, so every call runs its runs. Prints each figure, the load average
before it, and the route each run took (its run.json's `launcher`: clustershell, or ansible for run.yml).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _common import ROOT

PROFILES = ["seq-read-1m", "rand-read-16k", "imagenet-bssplit"]


BACKEND: dict = {"type": "tmpfs"}  # --backend's fields but name and size (a Ceph backend's: the box's cluster)
CHECKOUT = ROOT  # --checkout


def campaign(directory: Path, name: str, runs: int) -> Path:
    """One fio run of 2 s + 1 s (runs=1), or 3 profiles × 2 repetitions of 5 s + 1 s."""
    one = runs == 1
    backend = {"name": f"{name}-mem", **BACKEND}
    backend.update(
        {
            "tmpfs": {"size": "256MiB" if one else "1GiB"},
            "rbd": {"size": "192MiB", "image": name},
            "rbd_snapshot": {"size": "256MiB", "image": name, "fio_size": "128MiB"},  # loaded by the first command
        }.get(BACKEND["type"], {})
    )
    data = {
        "name": name,
        "repetitions": 1 if one else 2,
        "backends": [backend],
        "workloads": [
            {"name": p, "type": "fio", "profile": p, "runtime": "2s" if one else "5s", "ramp": "1s", "size": "128MiB"}
            for p in (PROFILES[:1] if one else PROFILES)
        ],
    }
    path = directory / f"{name}.yml"
    path.write_text(yaml.safe_dump(data))
    return path


LOADERS = {
    "pytorch": {"type": "pytorch", "reader": "packed", "workers": 0, "batch_size": 32, "decode": False, "epochs": 1},
    "tensorflow": {"type": "tensorflow", "batch_size": 32, "decode": False, "epochs": 1},
    # 63 MB of llama3-8b's checkpoint, 2 writers: written, fsynced, dropped, read back (its run: both phases)
    "checkpoint": {"type": "checkpoint", "model": "llama3-8b", "scale": 0.0006, "writers": 2},
    # a trace of 2,000 reads of 4 KiB over one 8 MiB file (trace()), replayed as fast as the storage allows
    "replay": {"type": "replay", "timing": "fast"},
    # readdir, stat and open/close over the 256-file data set's tree, 2 threads
    "metadata": {"type": "metadata", "threads": 2},
    # 2 users' KV-cache entries (Llama-3.1-8B's at 1/32: 2 to 98 MiB) for 2 s, no data set
    "kvcache": {"type": "kvcache", "users": 2, "duration": "2s", "context_scale": 1 / 32},
    # one real ResNet-50 training step timed on this CPU (the tiny model at batch 2: the code path), no data set
    "calibrate": {"type": "calibrate", "model": "resnet50", "batch_size": 2, "scale": "tiny", "warmup_steps": 1}
    | {"steps": 2, "blocks": 2, "compile": "off"},
    # S3 objects on the lab in a box's radosgw (--backend s3): 16 of 1 MiB PUT then GET by 2 threads, 2 s each
    "objects": {"type": "objects", "size": "1MiB", "threads": 2, "objects": 16, "runtime": "2s", "ramp": "0s"},
    # DLIO itself (engine dlio) under mpirun, one rank of an emulated B200 on retinanet's JPEGs
    "dlio": {"type": "pytorch", "engine": "dlio", "reader": "pil", "workers": 1, "batch_size": 4, "accelerators": 1}
    | {"accelerator": {"type": "b200", "model": "retinanet"}},
}


def trace(directory: Path) -> Path:
    """--kind replay's trace (26 KiB: it travels in the call's argv), written once into the bench's directory."""
    from iolab.shared import trace as traces  # (_common put this checkout's pyfiles on the path)

    records = [(1, "read", 0, (i % 2048) * 4096, 4096, i * 10, 5) for i in range(2000)]
    return traces.write(directory, {"root": "/data", "files": [["data.bin", 8 << 20]]}, records)


def loader_campaign(directory: Path, name: str, kind: str, runs: int, backend: dict) -> Path:
    """One epoch of a loader `kind` over a 256-file data set, `runs` repetitions, on `backend`: a 256 MiB tmpfs, a
    directory on this machine's disk (--backend local) or the box's bucket (s3). Each command puts the data set there
    and removes it at its end: the tmpfs is unmounted, the local backend's iolab-<host> directory removed."""
    data = {
        "name": name,
        "repetitions": runs,
        "backends": [{"name": f"{name}-{backend['type']}", **backend}],
        "workloads": [{"name": "load", **LOADERS[kind]}],
    }
    if kind == "replay":
        data["workloads"][0]["trace"] = str(trace(directory))
    elif kind == "dlio":  # retinanet's JPEGs, few: DLIO's epoch reads them at its accelerator's pace
        data["dataset"] = {"kind": "retinanet", "files": 32, "seed": 1, "classes": 2}
    elif kind not in ("checkpoint", "kvcache", "calibrate", "objects"):
        data["dataset"] = {"kind": "imagenet-like", "files": 256, "seed": 1, "classes": 4}
    path = directory / f"{name}.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def tool_times(results: Path, name: str) -> list[tuple[float, float]]:
    """Each run's tool (started_at, ended_at), epoch s, from its run.json, in order (a checkpoint's: from its write
    phase's start, write/run.json, to its read's end)."""
    times = []
    for path in (results / name).glob("raw/*/*/run.json"):
        record, write = json.loads(path.read_text()), path.parent / "write" / "run.json"
        started = json.loads(write.read_text())["started_at"] if write.exists() else record["started_at"]
        times.append((started, record["ended_at"]))
    return sorted(times)


def loaders(kind: str, work: Path, name: str, rounds: int, backend: dict) -> None:
    """--kind: a loader's harness on one run and its per-run cost between the runs of a 4-run batch, on `backend`
    (loader_campaign)."""
    one, four = loader_campaign(work, name, kind, 1, backend), loader_campaign(work, f"{name}4", kind, 4, backend)
    bench_all(one, work / "setup")  # sets the hosts up (this release), unmeasured
    for round_ in range(1, rounds + 1):
        load = os.getloadavg()[0]
        wall = bench_all(one, work / f"r{round_}-1")
        ((start, end),) = tool_times(work / f"r{round_}-1", one.stem)
        route = routes(work / f"r{round_}-1", one.stem)
        print(
            f"round {round_}, 1 {kind} run: {wall:.2f} s wall, loader {end - start:.2f} s, harness "
            f"{wall - (end - start):.2f} s, load {load:.2f} before, route {route}",
            flush=True,
        )
        load = os.getloadavg()[0]
        wall = bench_all(four, work / f"r{round_}-4")
        times = tool_times(work / f"r{round_}-4", four.stem)
        gaps = [b[0] - a[1] for a, b in zip(times, times[1:], strict=False)]
        route = routes(work / f"r{round_}-4", four.stem)
        print(
            f"round {round_}, 4 {kind} runs: {wall:.2f} s wall, between runs {sum(gaps) / len(gaps):.2f} s "
            f"(each: {', '.join(f'{g:.2f}' for g in gaps)}), load {load:.2f} before, route {route}",
            flush=True,
        )


def bench_all(path: Path, results: Path) -> float:
    """`./lab bench.all --campaign PATH` into `results`; its wall time in s. Where another engineer's command holds
    localhost, waits and tries again (never --steal)."""
    env = {**os.environ, "IOLAB_RESULTS": str(results)}
    argv = ["./lab", "bench.all", "--campaign", str(path)]
    if CHECKOUT != ROOT:  # that checkout's tasks and code, this virtualenv (its ./lab would make one of its own)
        env["PYTHONPATH"] = str(CHECKOUT / "pyfiles")
        argv = [str(ROOT / ".venv/bin/invoke"), "--write-pyc", *argv[1:]]  # as ./lab: its bytecode cached
    while True:
        started = time.monotonic()
        done = subprocess.run(argv, cwd=CHECKOUT, env=env, capture_output=True)
        wall = time.monotonic() - started
        if done.returncode == 0:
            return wall
        if b"is held by" not in done.stderr:
            raise SystemExit(f"bench.all {path} failed ({done.returncode}):\n{done.stderr.decode()}")
        print(f"(localhost held by another command: waiting) {done.stderr.decode().strip()}", flush=True)
        time.sleep(15)


def routes(results: Path, name: str) -> list[str]:
    return sorted({json.loads(p.read_text()).get("launcher", "?") for p in (results / name).glob("raw/*/*/run.json")})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--name", default="fanlocal", help="campaign name, and the tmpfs /mnt/iolab/NAME-mem")
    parser.add_argument("--kind", choices=["fio", *LOADERS], default="fio", help="the runs' kind (fio: (a) and (b))")
    parser.add_argument(
        "--backend",
        choices=["tmpfs", "rbd", "rbd_snapshot", "cephfs", "local", "s3"],
        default="tmpfs",
        help="fio's backend (tmpfs, rbd, rbd_snapshot, cephfs); a loader's (tmpfs, or local: a directory on this "
        "disk); objects' (s3: the box's radosgw)",
    )
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose code runs (default: this)")
    opts = parser.parse_args()
    global CHECKOUT
    CHECKOUT = opts.checkout.resolve()
    work = Path(tempfile.mkdtemp(prefix="harness-cost-"))
    ours = {"fio": ("tmpfs", "rbd", "rbd_snapshot", "cephfs"), "objects": ("s3",)}.get(opts.kind, ("tmpfs", "local"))
    if opts.backend not in ours:
        raise SystemExit(f"--backend {opts.backend} is not one for --kind {opts.kind} (it takes {', '.join(ours)})")
    with contextlib.ExitStack() as stack:
        if opts.backend not in ("tmpfs", "local"):
            sys.path.insert(0, str(ROOT / "tests"))
            from labbox import lab_box  # the tests' lab in a box: its own ports and directory, torn down after

            box = stack.enter_context(lab_box("127.0.0.1")).ensure("ceph")
            fields = box.s3_fields() if opts.backend == "s3" else box.ceph_fields()
            BACKEND.update(type=opts.backend, **fields, **({"method": "fuse"} if opts.backend == "cephfs" else {}))
        if opts.kind == "fio":
            fio_rounds(work, opts.name, opts.rounds)
            return
        if opts.backend == "local":
            (work / "local").mkdir()
            BACKEND.update(type="local", path=str(work / "local"))
        elif opts.backend == "tmpfs":
            BACKEND.update(size="256MiB")
        loaders(opts.kind, work, opts.name, opts.rounds, BACKEND)


def fio_rounds(work: Path, name: str, rounds: int) -> None:
    """(a) and (b) for fio, `rounds` times."""
    opts = argparse.Namespace(name=name, rounds=rounds)
    one, six = campaign(work, opts.name, 1), campaign(work, f"{opts.name}6", 6)
    bench_all(one, work / "setup")  # sets the hosts up (this release), unmeasured
    for round_ in range(1, opts.rounds + 1):
        for path, runs, busy in ((one, 1, 3.0), (six, 6, 36.0)):
            load = os.getloadavg()[0]
            wall = bench_all(path, work / f"r{round_}-{runs}")
            said = (
                f"{wall:.2f} s wall"
                if runs == 1
                else f"Σ(runtime+ramp)/wall {busy / wall:.3f} ({busy:.0f}/{wall:.1f} s)"
            )
            route = routes(work / f"r{round_}-{runs}", path.stem)
            if runs > 1:
                times = tool_times(work / f"r{round_}-{runs}", path.stem)
                gaps = [b[0] - a[1] for a, b in zip(times, times[1:], strict=False)]
                said += f", between runs {sum(gaps) / len(gaps):.2f} s"
            print(f"round {round_}, {runs} run(s): {said}, load {load:.2f} before, route {route}", flush=True)


if __name__ == "__main__":
    main()
