"""Generate an ImageNet-shaped data set: real JPEGs whose sizes follow ImageNet's.

    root/manifest.jsonl
    root/train/n000/00000000.jpg, root/train/n001/00000001.jpg, …   (label = index % classes)

Sizes. The target is the ImageNet bssplit of docs/REFERENCE_FIGURES.md, read as file
counts per power-of-two bucket, a bucket B holding the sizes in [B, 2B): with sizes
spread evenly inside each bucket that histogram has a mean of 115,169 B, MLPerf
Storage's 114,660 B within 0.5% (read as (B/2, B] it would be 57.6 kB, half of it).
Each bucket gets its share of the files by largest remainder, so a set of any size
matches the histogram to one file per bucket; inside a bucket, sizes are stratified
and spread as B·(1.01 + 0.98·u**a), with `a` (≈1.03) chosen so that the expected
mean is exactly 114,660 B, and kept 1% off the bucket edges.

Content. Each image is a smooth colour gradient plus uniform noise (amplitude 96),
JPEG quality 90, 4:2:0: about 0.6 B per pixel, so a 114 kB file is about 500×375
pixels like ImageNet's most common image, and decoders do the work they do on the
real set. A file reaches its target size through its height (the width comes from
its aspect ratio): a first guess from the bytes-per-pixel model, then secant steps
within a bracket until it is within 2% of the target and inside its bucket, about
1.05 JPEG encodings per file (a few small files, whose size moves in steps of an
8-pixel block row, settle for the nearest size in their bucket, within 3%). No padding: every byte is
image data or standard JPEG headers.

Determinism. The parent draws the whole plan (each file's path, label and target
size) from the data set seed before any work starts; a file's bytes depend only on
its plan entry, on a random stream derived from (seed, index) and on a noise pool
derived from the seed (SHAKE-256), never on which worker renders it or when. Randomness comes from hashlib and from
random.Random().random() alone, the one stream Python promises to keep across
versions (choice, randrange and shuffle carry no such promise). Same seed, same
Pillow (and so libjpeg-turbo) version: byte-identical files and manifest for any
worker count.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import multiprocessing
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from iolab.errors import UserError
from iolab.host.dataset import samples
from iolab.host.dataset.manifest import MANIFEST_NAME, Entry, Manifest
from iolab.host.dataset.pack import pack
from iolab.shared.fio_options import IMAGENET_BSSPLIT
from iolab.shared.shapes import GENERATORS, JPEG_KINDS, SHAPES

GENERATOR = "iolab.host.dataset.gen/1"  # bump when the same seed would give other bytes
TARGET_MEAN = 114_660  # MLPerf Storage resnet50 sample size, bytes
IN_PROGRESS = ".iolab-gen.json"  # config of a generation under way; gone once the manifest is written

# Data set kinds and the generator that makes each (a manifest names it; another generator's set is refused).
KINDS = {"imagenet-like": GENERATOR, **GENERATORS}

_EDGE = 0.01  # targets stay this far inside their bucket
_TOLERANCE = 0.02  # accepted distance of a file's size from its target
_QUALITY = 90
_NOISE = 96  # noise amplitude: sets the bytes per pixel of the content
# JPEG bytes ≈ HEADER + PER_PIXEL·pixels + PER_EDGE·√pixels at quality 90, amplitude 96:
# a least-squares fit over 3,400 encodings, unbiased in every bucket (±0.2%).
_HEADER = 616.0  # JFIF, quantization and Huffman tables as Pillow writes them
_PER_PIXEL = 0.5863
_PER_EDGE = 4.855  # partial blocks along the borders weigh more in small images
_POOL = 2048  # side of the noise pool; the largest image (512 kB) needs about 1070 px
_ASPECTS = ((4, 3), (4, 3), (4, 3), (3, 2), (1, 1), (3, 4))  # landscape-heavy, as ImageNet
_MAX_ENCODES = 12


def _parse_split(text: str) -> list[tuple[int, int]]:
    """[(bucket bytes, weight)] from '2K/1:4K/2:…'."""
    out = []
    for part in text.split(":"):
        size, weight = part.split("/")
        out.append((int(size.rstrip("Kk")) * 1024, int(weight)))
    return out


_BUCKETS = _parse_split(IMAGENET_BSSPLIT)  # ImageNet train JPEGs' sizes
_WEIGHT_SUM = sum(w for _, w in _BUCKETS)
# Expected mean = Σ w·B·(1 + EDGE + (1 − 2·EDGE)/(a + 1)) / Σ w, solved for a.
_LOWER_MEAN = sum(b * w for b, w in _BUCKETS) / _WEIGHT_SUM
_SHAPE = (1 - 2 * _EDGE) / (TARGET_MEAN / _LOWER_MEAN - 1 - _EDGE) - 1


def _derive(seed: int, *parts: object) -> int:
    text = "/".join([GENERATOR, str(seed), *map(str, parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _below(rng: random.Random, n: int) -> int:
    """An integer in [0, n) from random() alone (see Determinism above)."""
    return min(int(rng.random() * n), n - 1)


def target_sizes(files: int, seed: int) -> list[int]:
    """The target size of every file, by index: the histogram exactly, in seeded order."""
    rng = random.Random(_derive(seed, "sizes"))
    exact = [files * w / _WEIGHT_SUM for _, w in _BUCKETS]
    counts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: (counts[i] - exact[i], i))
    for i in by_remainder[: files - sum(counts)]:
        counts[i] += 1
    sizes = []
    for (bucket, _), count in zip(_BUCKETS, counts, strict=False):
        for j in range(count):
            u = (j + rng.random()) / count  # one draw per stratum of the bucket
            sizes.append(int(bucket * (1 + _EDGE + (1 - 2 * _EDGE) * u**_SHAPE)))
    for i in range(len(sizes) - 1, 0, -1):  # Fisher–Yates on random() alone
        j = _below(rng, i + 1)
        sizes[i], sizes[j] = sizes[j], sizes[i]
    return sizes


def _names(files: int, classes: int) -> tuple[Callable[[int], str], Callable[[int], int]]:
    cls_width = max(3, len(str(classes - 1)))
    file_width = max(8, len(str(files - 1)))

    def path(i: int) -> str:
        return f"train/n{i % classes:0{cls_width}d}/{i:0{file_width}d}.jpg"

    return path, lambda i: i % classes


# ----------------------------------------------------------------- rendering (workers)

_pool_seed: int | None = None
_pool: np.ndarray | None = None


def _noise_pool(seed: int) -> np.ndarray:
    global _pool_seed, _pool
    if _pool is None or _pool_seed != seed:
        raw = hashlib.shake_256(f"{GENERATOR}/{seed}/noise".encode()).digest(_POOL * _POOL * 3)
        pool = np.frombuffer(raw, dtype=np.uint8).reshape(_POOL, _POOL, 3)
        _pool = ((pool.astype(np.uint16) * _NOISE) >> 8).astype(np.uint8)
        _pool_seed = seed
    return _pool


def render(seed: int, index: int, target: int) -> bytes:
    """The JPEG of file `index` of a data set: in the bucket of `target`, and within 2% of it
    wherever a height gets there (else the nearest size found)."""
    noise = _noise_pool(seed)
    rng = random.Random(_derive(seed, "file", index))
    aspect_w, aspect_h = _ASPECTS[_below(rng, len(_ASPECTS))]
    # Offset and horizontal ramp per channel, one vertical ramp: room left for the noise.
    room = 255 - _NOISE
    ramp_y = _below(rng, room + 1)
    offset, ramp_x = [], []
    for _ in range(3):
        rx = _below(rng, room + 1 - ramp_y)
        ramp_x.append(rx)
        offset.append(_below(rng, room + 1 - ramp_y - rx))
    pool_x, pool_y = rng.random(), rng.random()

    low, high = 1 << (target.bit_length() - 1), 1 << target.bit_length()
    pixels = _pixels(target)
    width = min(_POOL, max(8, round(math.sqrt(pixels * aspect_w / aspect_h))))
    height = min(_POOL, max(8, round(pixels / width)))
    short, tall = 1, _POOL + 1  # bracket on the height: too small < target <= too large
    best = None
    for _ in range(_MAX_ENCODES):
        data = _encode(noise, width, height, offset, ramp_x, ramp_y, pool_x, pool_y)
        size = len(data)
        if low <= size < high:
            if best is None or abs(size - target) < abs(len(best) - target):
                best = data
            if abs(size - target) <= _TOLERANCE * target:
                return data
        if size < target:
            short = max(short, height)
        else:
            tall = min(tall, height)
        guess = round(height * pixels / _pixels(size))
        if not short < guess < tall:
            guess = (short + tall) // 2
        if guess == height:
            break
        height = guess
    if best is None:
        raise RuntimeError(f"file {index}: no JPEG of {target} B within its bucket; this is a bug")
    return best


def _pixels(size: float) -> float:
    """Pixels for a JPEG of `size` bytes, by the model above."""
    a, b, c = _PER_PIXEL, _PER_EDGE, _HEADER - size
    root = (-b + math.sqrt(max(b * b - 4 * a * c, 0.0))) / (2 * a)
    return max(64.0, root * root)


def _encode(noise, width, height, offset, ramp_x, ramp_y, pool_x, pool_y) -> bytes:
    x0 = int(pool_x * (_POOL - width))
    y0 = int(pool_y * (_POOL - height))
    # Work on rows of width*3 bytes: numpy is slow on an innermost axis of 3.
    row = (
        (
            np.arange(width, dtype=np.uint32)[:, None] * np.array(ramp_x, np.uint32) // max(width - 1, 1)
            + np.array(offset, np.uint32)
        )
        .astype(np.uint8)
        .reshape(-1)
    )
    column = (np.arange(height, dtype=np.uint32) * ramp_y // max(height - 1, 1)).astype(np.uint8)
    pixels = noise[y0 : y0 + height, x0 : x0 + width].reshape(height, width * 3) + row
    pixels += column[:, None]
    out = io.BytesIO()
    Image.fromarray(pixels.reshape(height, width, 3)).save(out, "JPEG", quality=_QUALITY, subsampling=2)
    return out.getvalue()


def _write_batch(job: tuple[str, int, list[tuple[int, str, int]]]) -> list[tuple[int, int, str]]:
    root, seed, batch = job
    done = []
    for index, path, target in batch:
        data = render(seed, index, target)
        with open(os.path.join(root, path), "wb") as f:
            f.write(data)
        done.append((index, len(data), hashlib.sha256(data).hexdigest()))
    return done


# ----------------------------------------------------------------- the data set


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def gen(
    root: Path,
    files: int,
    seed: int,
    classes: int = 100,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    kind: str = "imagenet-like",
    file_size: int | None = None,
    replace: bool = False,
) -> Manifest:
    """Generate the data set in root, or return the one already there if it has this config.

    `kind`: imagenet-like or retinanet (JPEGs, here; retinanet's of MLPerf's one size), or an MLPerf workload's
    samples (iolab.host.dataset.samples: unet3d's NPZ files; cosmoflow's, one per TFRecord file as MLPerf has them).
    `file_size`: every JPEG about this many bytes instead of ImageNet's size mix (iolab's own benchmarks).
    `replace`: root is iolab's own scratch (an s3 backend's staging copy): another data set there is
    removed, not refused.

    >>> m = gen(Path("/var/tmp/iolab/imagenet"), files=2000, seed=1)   # doctest: +SKIP
    >>> m.hash, len(m.entries)                                          # doctest: +SKIP
    """
    root = Path(root)
    if files < 1 or classes < 1:
        raise UserError(f"a data set needs at least one file and one class, got files={files} classes={classes}")
    if kind not in KINDS:
        raise UserError(f"unknown data set kind {kind!r}: expected one of {', '.join(KINDS)}")
    config = {"files": files, "seed": seed, "classes": classes}
    generator = f"{KINDS[kind]} files of {file_size} B" if file_size else KINDS[kind]  # never taken for another
    existing = _reusable(root, config, generator, replace)
    if existing is not None:
        if progress:
            progress(files, files)
        return existing

    root.mkdir(parents=True, exist_ok=True)
    (root / IN_PROGRESS).write_text(json.dumps(config, sort_keys=True) + "\n")
    if kind in ("imagenet-like", *JPEG_KINDS):
        one_size = file_size or (SHAPES[kind][0] if kind in JPEG_KINDS else None)
        manifest = _jpegs(root, config, generator, one_size, workers, progress)
    else:
        manifest = samples.generate(root, kind, files, seed, classes, workers or default_workers(), progress)
    manifest.write(root)
    if kind == "cosmoflow":  # MLPerf's layout: one sample per TFRecord file
        pack(root, "tfrecord", samples_per_shard=1)
    (root / IN_PROGRESS).unlink()
    return manifest


def _reusable(root: Path, config: dict, generator: str, replace: bool) -> Manifest | None:
    """The data set already in root if it has this config (as _existing); another one there is refused, or
    removed where root is iolab's own scratch (`replace`)."""
    try:
        return _existing(root, config, generator)
    except UserError:
        if not replace:
            raise
        shutil.rmtree(root)
        return None


def _jpegs(
    root: Path,
    config: dict,
    generator: str,
    one_size: int | None,
    workers: int | None,
    progress: Callable[[int, int], None] | None,
) -> Manifest:
    """Render the JPEGs of a data set of `config` in root, each about `one_size` bytes (None: ImageNet's mix)."""
    files, seed, classes = config["files"], config["seed"], config["classes"]
    path_of, label_of = _names(files, classes)
    for label in range(min(classes, files)):
        (root / path_of(label)).parent.mkdir(parents=True, exist_ok=True)
    targets = [one_size] * files if one_size else target_sizes(files, seed)
    plan = [(i, path_of(i), targets[i]) for i in range(files)]
    sizes, hashes = _render_all(root, seed, plan, workers, progress)
    return Manifest(
        files=files,
        seed=seed,
        classes=classes,
        generator=generator,
        entries=tuple(Entry(path=path_of(i), size=sizes[i], sha256=hashes[i], label=label_of(i)) for i in range(files)),
    )


def _render_all(
    root: Path,
    seed: int,
    plan: list[tuple[int, str, int]],
    workers: int | None,
    progress: Callable[[int, int], None] | None,
) -> tuple[list[int], list[str]]:
    """Render every file of `plan` in batches over `workers` processes: each file's size and SHA-256, by index."""
    files = len(plan)
    workers = max(1, min(workers or default_workers(), files))
    per_batch = max(1, min(64, files // (workers * 16)))
    jobs = [(str(root), seed, plan[i : i + per_batch]) for i in range(0, files, per_batch)]
    sizes: list[int] = [0] * files
    hashes: list[str] = [""] * files
    if progress:
        progress(0, files)
    if workers == 1:
        _collect(map(_write_batch, jobs), sizes, hashes, files, progress)
    else:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with multiprocessing.get_context(method).Pool(workers) as pool:
            _collect(pool.imap_unordered(_write_batch, jobs), sizes, hashes, files, progress)
    return sizes, hashes


def _collect(results, sizes, hashes, total, progress) -> None:
    done = 0
    for batch in results:
        for index, size, digest in batch:
            sizes[index] = size
            hashes[index] = digest
        done += len(batch)
        if progress:
            progress(done, total)


def _existing(root: Path, config: dict, generator: str = GENERATOR) -> Manifest | None:
    """The data set already in root if it has this config and generator; None if root is free for it."""
    if Manifest.exists(root):
        manifest = Manifest.load(root)
        found = {"files": manifest.files, "seed": manifest.seed, "classes": manifest.classes}
        if manifest.generator != generator:
            raise UserError(
                f"{root} already holds a data set made by {manifest.generator}, not {generator}: "
                "use another directory or remove it"
            )
        if found != config:
            raise UserError(
                f"{root} already holds a data set with {_describe(found)}, not {_describe(config)}: "
                "use another directory or remove it"
            )
        problems = manifest.check_sizes(root)
        if problems:
            raise UserError(
                f"{root}: {len(problems)} of {manifest.files} files of the data set are missing "
                f"or changed (first: {problems[0]}); remove the directory and generate it again"
            )
        return manifest
    marker = root / IN_PROGRESS
    if marker.is_file():
        try:
            in_progress: Any = json.loads(marker.read_text())
        except (OSError, json.JSONDecodeError):
            in_progress = None
        if in_progress != config:
            raise UserError(
                f"{root} holds an interrupted generation of another data set ({marker}): "
                "use another directory or remove it"
            )
        return None  # resume: the same seed rewrites the same bytes
    if root.is_dir() and any(root.iterdir()):
        raise UserError(
            f"{root} is not empty and holds no data set manifest ({MANIFEST_NAME}): use an empty or new directory"
        )
    return None


def _describe(config: dict) -> str:
    return ", ".join(f"{k}={config[k]}" for k in ("files", "seed", "classes"))
