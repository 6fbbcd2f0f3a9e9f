"""Metadata rates over a data set's tree: readdir, stat, open — the small-file bottleneck (stdlib only).

    python -m iolab.kinds.metadata.host --root DS --out RUN_DIR --threads 4 [--limit N] [--no-drop-caches]

Three timed operations, one after the other, each over the whole tree (stat and
open over the first --limit files of the manifest when given):

    readdir   list every directory of the tree (scandir): entries listed per second
    stat      stat every data file by its path, as a loader with an index does: stats per second
    open      open and close every data file, reading nothing: opens per second

`--threads` workers share each operation (these calls release the GIL; a network
file system wants several requests in flight). Caches are dropped before each
operation (iolab.host.caches, as role drop_caches), so stat does not profit from the dentries
and inodes readdir just brought in, nor open from stat's; --no-drop-caches keeps
them, to measure the warm case. Results go to RUN_DIR/metadata.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from iolab.host import caches
from iolab.host.loader.common import switch

KIND = "iolab.metadata/1"
_CHUNK = 256


def _chunks(items: list, size: int = _CHUNK) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _list(directories: list[str]) -> tuple[int, list[str]]:
    entries, subdirs = 0, []
    for directory in directories:
        with os.scandir(directory) as it:
            for entry in it:
                entries += 1
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.path)
    return entries, subdirs


def _stat(paths: list[str]) -> int:
    for path in paths:
        os.stat(path)
    return len(paths)


def _open(paths: list[str]) -> int:
    flags = os.O_RDONLY | os.O_CLOEXEC
    for path in paths:
        os.close(os.open(path, flags))
    return len(paths)


def _timed(pool: ThreadPoolExecutor, work, chunks: list[list], drop: bool) -> dict:
    dropped = not caches.drop() if drop else False
    started = time.perf_counter()
    ops = sum(pool.map(work, chunks))
    return {"ops": ops, "seconds": time.perf_counter() - started, "caches_dropped": dropped}


def measure(root: Path, threads: int, limit: int | None = None, drop: bool = True) -> dict:
    from iolab.host.dataset.manifest import MANIFEST_NAME, Manifest

    root = Path(root)
    manifest = Manifest.load(root)
    digest = hashlib.sha256((root / MANIFEST_NAME).read_bytes()).hexdigest()
    paths = [str(root / e.path) for e in manifest.entries[:limit]]
    with ThreadPoolExecutor(threads) as pool:
        # readdir: breadth-first, each level's directories shared by the threads.
        dropped = not caches.drop() if drop else False
        started = time.perf_counter()
        level, entries, dirs = [str(root)], 0, 0
        while level:
            dirs += len(level)
            found = list(pool.map(_list, _chunks(level, 8)))
            entries += sum(n for n, _ in found)
            level = [d for _, subdirs in found for d in subdirs]
        readdir = {
            "ops": entries,
            "directories": dirs,
            "seconds": time.perf_counter() - started,
            "caches_dropped": dropped,
        }
        stat = _timed(pool, _stat, _chunks(paths), drop)
        opened = _timed(pool, _open, _chunks(paths), drop)
    return {
        "kind": KIND,
        "root": str(root),
        "manifest_hash": digest,
        "files": len(paths),
        "threads": threads,
        "operations": {"readdir": readdir, "stat": stat, "open": opened},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m iolab.kinds.metadata.host")
    p.add_argument("--root", type=Path, required=True, help="the data set (its manifest.jsonl)")
    p.add_argument("--out", type=Path, required=True, help="directory that receives metadata.json")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--limit", type=int, default=0, help="stat and open the first N files only (0: all)")
    switch(p, "--drop-caches", True, "drop caches before each operation (needs root)")
    args = p.parse_args(argv)
    if args.threads < 1:
        print("--threads must be at least 1", file=sys.stderr)
        return 2
    result = measure(args.root, args.threads, args.limit or None, args.drop_caches)
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = args.out / "metadata.json.tmp"
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(args.out / "metadata.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
