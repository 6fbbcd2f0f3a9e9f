"""A loader run's prepare on its host (host side, stdlib only): what the bench role's preflight checked, then the
run directory and the cache drop.

    python -m iolab.host.prepare loader --kind pytorch|tensorflow|metadata|dlio --host NAME --dir RUN_DIR
                                 --root DATASET [--pack packed] [--pack tfrecord] [--dali] [--drop-caches]
                                 [--workload JSON] [--key PATH]     (dlio: DLIO's settings, mpirun's key)
    python -m iolab.host.prepare directory --dir RUN_DIR [--drop-caches]
                                 (no data set: a calibration, without a drop; S3 objects, with the run's)
    python -m iolab.host.prepare kvcache --host NAME --run-dir RUN_DIR --dir WORKDIR --clients N --options JSON
                                 [--pause S] [--drop-caches]    (the KV-cache clients: room and memory, the pause)
                                 [--reference [--key PATH]]     (kv-cache.py: installed, mpirun's key)

One call, whichever route runs it: the fan-out's `hostrun run --before` (iolab.drive.fanout_run) or the bench role's
`hostrun step` (roles/bench_pytorch, roles/bench_tensorflow, roles/bench_metadata, roles/bench_dlio). In order: the
data set's manifest and the packs its reader reads are there (one line naming what is missing and how the campaign
makes it), NVIDIA DALI imports for reader dali (iolab.host.loader.dali_reader's line); for DLIO, that it is installed
(iolab.host.dlio.refusal) and that the first host holds mpirun's key (no_key), then this host's DLIO workload file
(iolab.host.dlio.write_config); then the run directory is made and, with --drop-caches, the caches are synced,
dropped and the drop recorded (iolab.host.caches, as role drop_caches does). Nothing is made before every check has
passed: a refused run leaves no directory. A KV-cache run's (roles/bench_kvcache, roles/bench_mlperf_kvcache) checks
instead the target's room and the host's memory for its clients (iolab.host.kvcache's refusal, in the work directory
it makes for that; for kv-cache.py, that it is installed and the first host's key too), then idles its pause. Its
last line is JSON: when it started (`started_at`), which sizes the common start's lead as fio's prepare does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

# What each loader kind reads, and the line that says how the campaign makes what is missing.
_HINTS = {
    "pytorch": (
        "{missing} missing on {host}: the campaign's dataset phase makes the data set on a writable backend (give "
        "the campaign a dataset; reader packed needs the packed format, dali_input tfrecord the tfrecord one); a "
        "read-only backend must hold it at <target>/dataset"
    ),
    "tensorflow": (
        "no TFRecord pack at {root}/tfrecord on {host}: the campaign's dataset phase makes it on a writable backend "
        "(give the campaign a dataset); a read-only backend must hold it at <target>/dataset/tfrecord"
    ),
    "metadata": (
        "no data set at {root} on {host}: the campaign's dataset phase makes it on a writable backend (give the "
        "campaign a dataset); a read-only backend must hold it at <target>/dataset"
    ),
    "dlio": (
        "{missing} missing on {host}: the campaign's dataset phase makes the data set on a writable backend (give "
        "the campaign a dataset); a read-only backend must hold it at <target>/dataset"
    ),
}


def problem(kind: str, host: str, root: Path, packs: list[str], dali: bool) -> str:
    """Why the loader cannot run on this host ('' when it can): the data set, its packs, DALI."""
    needed = [root / "manifest.jsonl"] if kind != "tensorflow" else []  # tensorflow reads its pack only
    needed += [root / pack / "pack.json" for pack in packs]
    missing = [str(path) for path in needed if not path.exists()]
    if missing:
        return _HINTS[kind].format(missing=", ".join(missing), host=host, root=root)
    if dali:
        from iolab.host.loader.dali_reader import missing as dali_missing

        if said := dali_missing():
            return f"{host}: {said}"
    return ""


def loader(opts: argparse.Namespace) -> int:
    started_at = time.time()  # when this call reached the host
    if said := problem(opts.kind, opts.host, opts.root, opts.packs, opts.dali):
        print(said, file=sys.stderr)
        return 1
    if opts.kind == "dlio":  # DLIO installed, mpirun's key; then this host's DLIO workload file
        from iolab.host import dlio

        if refused := dlio.refusal(opts.host) or no_key(opts.host, opts.key, "bench_dlio_ssh_key"):
            print(refused, file=sys.stderr)
            return 1
        dlio.write_config(opts.dir, opts.root, opts.workload)
    return ready(started_at, opts.dir, opts.drop_caches)


def no_key(host: str, key: str, variable: str) -> str | None:
    """Why an MPI job cannot start from this host, its first (None when it can): `key` ('' on the other hosts), the
    ssh key its mpirun would start the other hosts' ranks with, is not there; `variable` names another."""
    if not key or Path(key).exists():
        return None
    return (
        f"{host} has no {key}, the ssh key mpirun would start the other hosts' ranks with: set {variable} to a key "
        f"on {host} that the other hosts accept"
    )


def kvcache(opts: argparse.Namespace) -> int:
    """A KV-cache run's prepare: the target's room and the host's memory for its clients (iolab.host.kvcache's
    check, its line; for MLCommons' kv-cache.py, `--reference`, that it is installed too, and on the first host
    mpirun's key), the pause between options, then the run directory and the drop."""
    if opts.reference:
        from iolab.host.mlperf_kvcache import refusal
    else:
        from iolab.host.kvcache import refusal

    opts.dir.mkdir(parents=True, exist_ok=True)  # the room is read on the target's file system
    said = refusal(opts.dir, opts.clients, opts.options) or no_key(opts.host, opts.key, "bench_mlperf_kvcache_ssh_key")
    if said:
        print(said, file=sys.stderr)
        return 1
    time.sleep(max(opts.pause, 0.0))
    return ready(time.time(), opts.run_dir, opts.drop_caches)  # the call's start, for the lead: after the pause


def ready(started_at: float, run_dir: Path, drop_caches: bool, said: dict | None = None) -> int:
    """Every check passed: the run directory, the caches synced, dropped and the drop recorded (`drop_caches`),
    then the JSON line of what the prepare says (`said`) and when the call started."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if drop_caches:
        from iolab.host import caches

        if caches.drop_recorded(run_dir) != 0:
            return 1
    print(json.dumps({**(said or {}), "started_at": started_at}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iolab.host.prepare")
    sub = parser.add_subparsers(dest="command", required=True)
    load = sub.add_parser("loader", help="check a loader's data set, make the run directory, drop the caches")
    load.add_argument("--kind", choices=sorted(_HINTS), required=True)
    load.add_argument("--host", required=True, help="this host's inventory name, for the messages")
    load.add_argument("--dir", type=Path, required=True, help="the run's directory on this host")
    load.add_argument("--root", type=Path, required=True, help="the data set's directory")
    load.add_argument("--pack", action="append", default=[], dest="packs", help="a pack the reader reads; repeatable")
    load.add_argument("--dali", action="store_true", help="the reader is NVIDIA DALI: check that it imports")
    load.add_argument("--drop-caches", action="store_true", help="then sync and drop the caches, recording it")
    load.add_argument("--workload", type=json.loads, default={}, help="kind dlio: DLIO's workload settings (JSON)")
    load.add_argument("--key", default="", help="kind dlio, the first host of several: mpirun's ssh key, checked")
    only = sub.add_parser("directory", help="make the run directory only")
    only.add_argument("--dir", type=Path, required=True, help="the run's directory on this host")
    only.add_argument("--drop-caches", action="store_true", help="then sync and drop the caches, recording it")
    kv = sub.add_parser("kvcache", help="check the room and memory for the KV-cache clients, pause, make, drop")
    kv.add_argument("--host", required=True, help="this host's inventory name")
    kv.add_argument("--run-dir", type=Path, required=True, help="the run's directory on this host")
    kv.add_argument("--dir", type=Path, required=True, help="the clients' work directory on the storage under test")
    kv.add_argument("--clients", type=int, default=1, help="ranks on this host")
    kv.add_argument("--options", type=json.loads, required=True, help="the simulation's settings (JSON)")
    kv.add_argument("--pause", type=float, default=0.0, help="seconds idle once the checks pass (between options)")
    kv.add_argument("--drop-caches", action="store_true", help="then sync and drop the caches, recording it")
    kv.add_argument("--reference", action="store_true", help="the clients are MLCommons' kv-cache.py under mpirun")
    kv.add_argument("--key", default="", help="--reference, the first host of several: mpirun's ssh key, checked")
    opts = parser.parse_args(argv)
    if opts.command == "kvcache":
        return kvcache(opts)
    if opts.command == "directory":
        return ready(time.time(), opts.dir, opts.drop_caches)
    return loader(opts)


if __name__ == "__main__":
    raise SystemExit(main())
