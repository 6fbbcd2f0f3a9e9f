"""A loader run's prepare on its host (host side, stdlib only): what the bench role's preflight checked, then the
run directory and the cache drop.

    python -m iolab.host.prepare loader --kind pytorch|tensorflow|metadata --host NAME --dir RUN_DIR
                                 --root DATASET [--pack packed] [--pack tfrecord] [--dali] [--drop-caches]
    python -m iolab.host.prepare directory --dir RUN_DIR [--drop-caches]
                                 (no data set: a calibration, without a drop; S3 objects, with the run's)

One call, whichever route runs it: the fan-out's `hostrun run --before` (iolab.drive.fanout_run) or the bench role's
`hostrun step` (roles/bench_pytorch, roles/bench_tensorflow, roles/bench_metadata). In order: the data set's
manifest and the packs its reader reads are there (one line naming what is missing and how the campaign makes it),
NVIDIA DALI imports for reader dali (iolab.host.loader.dali_reader's line); then the run directory is made and, with
--drop-caches, the caches are synced, dropped and the drop recorded (iolab.host.caches, as role drop_caches does).
Nothing is made before every check has passed: a refused run leaves no directory. Its last line is JSON: when it
started (`started_at`), which sizes the common start's lead as fio's prepare does. The kinds whose prepare checks
more have their own, made of the same parts (`problem`, `no_key`, `ready`): DLIO's (iolab.kinds.dlio.host prepare)
and the KV-cache clients' (iolab.kinds.kvcache.host prepare, and host_reference's for kv-cache.py).
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
    load.add_argument("--kind", choices=sorted(k for k in _HINTS if k != "dlio"), required=True)  # (dlio: its own)
    load.add_argument("--host", required=True, help="this host's inventory name, for the messages")
    load.add_argument("--dir", type=Path, required=True, help="the run's directory on this host")
    load.add_argument("--root", type=Path, required=True, help="the data set's directory")
    load.add_argument("--pack", action="append", default=[], dest="packs", help="a pack the reader reads; repeatable")
    load.add_argument("--dali", action="store_true", help="the reader is NVIDIA DALI: check that it imports")
    load.add_argument("--drop-caches", action="store_true", help="then sync and drop the caches, recording it")
    only = sub.add_parser("directory", help="make the run directory only")
    only.add_argument("--dir", type=Path, required=True, help="the run's directory on this host")
    only.add_argument("--drop-caches", action="store_true", help="then sync and drop the caches, recording it")
    opts = parser.parse_args(argv)
    if opts.command == "directory":
        return ready(time.time(), opts.dir, opts.drop_caches)
    return loader(opts)


if __name__ == "__main__":
    raise SystemExit(main())
