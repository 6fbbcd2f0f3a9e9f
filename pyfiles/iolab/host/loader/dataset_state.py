"""Is the wanted data set already on this host? The dataset_gen role's probe (stdlib only).

    python -m iolab.host.loader.dataset_state ROOT --files 2000 --seed 1 --classes 100 --formats packed,wds [--replace]

prints one JSON object:

    state          ready    the data set and every wanted pack are there: nothing to do
                   partial  the data set is there, some packs are missing (`packs_missing`)
                   missing  nothing there yet, or an interrupted generation of this data set
                   other    ROOT holds something else: another data set, or files without a manifest
    manifest_hash  the data set's identity when its manifest is there
    free_bytes     free space under ROOT (or its nearest existing parent)
    needed_bytes   what generating and packing what is missing will take, with a 5% margin
    reason         for state other: what is there

--replace: ROOT is iolab's own scratch (an s3 backend's staging copy), where `gen --replace` removes
another data set: that is state missing, its bytes counted as free.

Only the manifest's first line is parsed and its bytes hashed; no data file is
read, so the probe costs the same for 1,000 files as for a million.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from iolab.shared.shapes import GENERATORS, MEAN_SIZE, SHAPES

MANIFEST = "manifest.jsonl"
IN_PROGRESS = ".iolab-gen.json"
PACK_INFO = "pack.json"
# Each kind's mean sample size and generator (iolab.shared.shapes, stdlib only).
KINDS = {
    "imagenet-like": (MEAN_SIZE, "iolab.host.dataset.gen/1"),
    **{kind: (mean, GENERATORS[kind]) for kind, (mean, _, _) in SHAPES.items()},
}
MARGIN = 1.05


def _free(path: Path) -> int:
    while not path.exists():
        path = path.parent
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _total_bytes(path: Path) -> int:
    total = 0
    with open(path) as f:
        next(f)
        for line in f:
            total += json.loads(line)["size"]
    return total


def _tree_bytes(root: Path) -> int:
    """The disk space the files under root take."""
    return sum(os.lstat(os.path.join(top, name)).st_blocks * 512 for top, _, names in os.walk(root) for name in names)


def state(
    root: Path,
    files: int,
    seed: int,
    classes: int,
    formats: list[str],
    kind: str = "imagenet-like",
    replace: bool = False,
) -> dict:
    """What of the data set is at root (the JSON object above); `replace`: root is iolab's scratch."""
    found = _state(Path(root), files, seed, classes, formats, kind)
    if found["state"] != "other" or not replace:
        return found
    free = found["free_bytes"] + _tree_bytes(Path(root))  # gen --replace removes it first
    return {**_missing(found, files, formats, kind), "free_bytes": free, "reason": found["reason"] + " (replaced)"}


def _missing(out: dict, files: int, formats: list[str], kind: str) -> dict:
    """Nothing of the data set there: all of it and its packs to make."""
    needed = int(files * KINDS[kind][0] * MARGIN) * (1 + len(formats))
    return {**out, "state": "missing", "packs_missing": list(formats), "needed_bytes": needed}


def _state(root: Path, files: int, seed: int, classes: int, formats: list[str], kind: str) -> dict:
    generator = KINDS[kind][1]
    wanted = {"files": files, "seed": seed, "classes": classes, "generator": generator}
    out: dict = {"root": str(root), "free_bytes": _free(root), "manifest_hash": None, "packs_missing": []}
    manifest = root / MANIFEST
    if manifest.is_file():
        with open(manifest) as f:
            header = json.loads(f.readline())
        found = {k: header.get(k) for k in wanted}
        if found != wanted:
            return {
                **out,
                "state": "other",
                "needed_bytes": 0,
                "reason": f"{root} holds another data set ({_describe(found)}), not {_describe(wanted)}",
            }
        out["manifest_hash"] = sha256_file(manifest)
        missing = []
        for fmt in formats:
            info = root / fmt / PACK_INFO
            try:
                done = json.loads(info.read_text()).get("manifest_hash") == out["manifest_hash"]
            except (OSError, ValueError):
                done = False
            if not done:
                missing.append(fmt)
        size = _total_bytes(manifest) if missing else 0
        return {
            **out,
            "state": "partial" if missing else "ready",
            "packs_missing": missing,
            "needed_bytes": int(size * MARGIN) * len(missing),
        }
    marker = root / IN_PROGRESS
    if marker.is_file():
        try:
            in_progress: Any = json.loads(marker.read_text())
        except (OSError, ValueError):
            in_progress = None
        if in_progress != {k: wanted[k] for k in ("files", "seed", "classes")}:
            return {
                **out,
                "state": "other",
                "needed_bytes": 0,
                "reason": f"{root} holds an interrupted generation of another data set",
            }
    elif root.is_dir() and any(root.iterdir()):
        return {
            **out,
            "state": "other",
            "needed_bytes": 0,
            "reason": f"{root} is not empty and holds no data set manifest ({MANIFEST})",
        }
    return _missing(out, files, formats, kind)  # cosmoflow's TFRecord copy is counted as a wanted pack


def _describe(config: dict) -> str:
    return ", ".join(f"{k}={config.get(k)}" for k in ("files", "seed", "classes", "generator"))


def main(argv: list[str] | None = None) -> int:
    from iolab.host.loader.common import switch

    p = argparse.ArgumentParser(prog="python -m iolab.host.loader.dataset_state")
    p.add_argument("root", type=Path)
    p.add_argument("--files", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--formats", default="", help="comma-separated pack formats wanted")
    p.add_argument("--kind", choices=list(KINDS), default="imagenet-like", help="what the data set holds")
    switch(p, "--replace", False, "ROOT is iolab's scratch: another data set there will be replaced (gen --replace)")
    args = p.parse_args(argv)
    formats = [f for f in args.formats.split(",") if f]
    found = state(args.root, args.files, args.seed, args.classes, formats, args.kind, args.replace)
    print(json.dumps(found, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
