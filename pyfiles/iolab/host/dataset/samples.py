"""Data sets of MLPerf Storage's other training workloads: unet3d's NPZ files, cosmoflow's TFRecord samples.

    root/manifest.jsonl
    root/train/n000/00000000.npz …     unet3d: one NPZ file per sample (x: uint8 volume, y: label)
    root/train/n000/00000000.bin …     cosmoflow: one sample's bytes per file, then
    root/tfrecord/train-00000-of-N.tfrecord   one TFRecord file per sample (MLPerf's layout), made here

Sizes follow the workload's configuration (shapes.SHAPES: MLPerf Storage's record length and its
standard deviation): a normal distribution cut at two standard deviations either side of the
mean (so the mean stays the configured one), drawn from the data set seed with Box–Muller on
random.Random().random() alone, the stream Python keeps across versions. Content is
incompressible: PCG64's raw output (numpy keeps each bit generator's raw stream stable),
seeded per file from (seed, index), so a file's bytes depend on the seed and its index only.
"""

from __future__ import annotations

import hashlib
import io
import math
import multiprocessing
import os
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np

from iolab.host.dataset.manifest import Entry, Manifest
from iolab.shared.shapes import GENERATORS, SHAPES

_CUT = 2.0  # standard deviations kept either side of the mean
_SMALLEST = 4096  # no sample below this, whatever the distribution says


def _derive(seed: int, *parts: object) -> int:
    text = "/".join(["iolab.host.dataset.samples/1", str(seed), *map(str, parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def target_sizes(kind: str, files: int, seed: int) -> list[int]:
    """Every sample's size, by index: normal around the workload's mean, cut at ±2 standard deviations."""
    mean, stdev, _ = SHAPES[kind]
    rng = random.Random(_derive(seed, kind, "sizes"))
    sizes: list[int] = []
    while len(sizes) < files:
        u1, u2 = rng.random(), rng.random()
        z = math.sqrt(-2 * math.log(1 - u1)) * math.cos(2 * math.pi * u2)
        if abs(z) <= _CUT:
            sizes.append(max(_SMALLEST, int(mean + z * stdev)))
    return sizes


def _noise(seed: int, index: int, size: int) -> np.ndarray:
    """`size` incompressible bytes of sample `index` (PCG64's raw stream)."""
    words = np.random.PCG64(_derive(seed, "file", index)).random_raw((size + 7) // 8)
    return words.view(np.uint8)[:size]


def _npz_overhead() -> int:
    out = io.BytesIO()
    np.savez(out, x=np.zeros(0, np.uint8), y=np.zeros(1, np.uint8))
    return len(out.getbuffer())


_NPZ_OVERHEAD = _npz_overhead()


def render(kind: str, seed: int, index: int, target: int, label: int) -> bytes:
    """The bytes of sample `index`: an NPZ of `target` bytes (unet3d) or `target` raw bytes (cosmoflow)."""
    if SHAPES[kind][2] == "bin":
        return _noise(seed, index, target).tobytes()
    out = io.BytesIO()
    np.savez(out, x=_noise(seed, index, max(0, target - _NPZ_OVERHEAD)), y=np.array([label % 256], np.uint8))
    return out.getvalue()


def _path(kind: str, index: int, files: int, classes: int) -> str:
    return (
        f"train/n{index % classes:0{max(3, len(str(classes - 1)))}d}/{index:0{max(8, len(str(files - 1)))}d}"
        f".{SHAPES[kind][2]}"
    )


def _write(job: tuple[str, str, int, int, int, int, str]) -> tuple[int, int, str]:
    root, kind, seed, index, target, label, path = job
    data = render(kind, seed, index, target, label)
    with open(os.path.join(root, path), "wb") as f:
        f.write(data)
    return index, len(data), hashlib.sha256(data).hexdigest()


def generate(
    root: Path,
    kind: str,
    files: int,
    seed: int,
    classes: int,
    workers: int,
    progress: Callable[[int, int], None] | None = None,
) -> Manifest:
    """Write every sample of a `kind` data set into `root` and return its manifest (not yet written)."""
    if kind not in SHAPES:
        raise ValueError(f"unknown data set kind {kind!r}: expected one of {', '.join(SHAPES)}")
    paths = [_path(kind, i, files, classes) for i in range(files)]
    for label in range(min(classes, files)):
        (root / paths[label]).parent.mkdir(parents=True, exist_ok=True)
    sizes = target_sizes(kind, files, seed)
    jobs = [(str(root), kind, seed, i, sizes[i], i % classes, paths[i]) for i in range(files)]
    found: list[tuple[int, str]] = [(0, "")] * files
    done = 0
    workers = max(1, min(workers, files))
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with multiprocessing.get_context(method).Pool(workers) if workers > 1 else _Serial() as pool:
        for index, size, digest in pool.imap_unordered(_write, jobs):
            found[index] = (size, digest)
            done += 1
            if progress:
                progress(done, files)
    return Manifest(
        files=files,
        seed=seed,
        classes=classes,
        generator=GENERATORS[kind],
        entries=tuple(
            Entry(path=paths[i], size=found[i][0], sha256=found[i][1], label=i % classes) for i in range(files)
        ),
    )


class _Serial:
    """A one-process stand-in for a multiprocessing pool."""

    def __enter__(self) -> _Serial:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    @staticmethod
    def imap_unordered(function, jobs):
        return map(function, jobs)
