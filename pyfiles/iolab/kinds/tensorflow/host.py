"""The TensorFlow tf.data benchmark of one host: TFRecord shards → tf.data → emulated accelerators → loader.json.

    python -m iolab.kinds.tensorflow.host --root DS --out RUN_DIR --batch-size 400 --private-threads 8 \\
        --compute-per-batch 0.224 --accelerators 2

The pipeline of TensorFlow's ImageNet input functions (and of DLIO's TF reader):

    list the shards of DS/tfrecord → shard by rank → shuffle the shard list
    → interleave(TFRecordDataset, parallel reads, AUTOTUNE calls, not deterministic)
    → shuffle a buffer of samples → map(parse the Example, decode the JPEG, crop and resize
      to 224×224; AUTOTUNE calls) → batch → prefetch(AUTOTUNE)

with `tf.data.Options().threading.private_threadpool_size` set from --private-threads
(0: TensorFlow's shared pool), the knob the field report found decisive
(`datasets_num_private_threads` in the TF official models). With --no-decode a
sample is its JPEG bytes. Ranks, the step loop, the measured window and loader.json
are those of every iolab loader (iolab.host.loader.common), so the pytorch parser reads it.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

from iolab.host.loader import common
from iolab.host.loader.common import run_steps

SIZE = 224
PACK_DIR = "tfrecord"


def parser() -> argparse.ArgumentParser:
    p = common.parser(
        "iolab.kinds.tensorflow.host",
        "tf.data throughput on TFRecord shards, with emulated accelerators.",
        "the data set; its shards are in ROOT/tfrecord",
        ("emulated",),
    )
    p.add_argument(
        "--private-threads", type=int, default=0, help="tf.data private thread pool size (0: TensorFlow's shared pool)"
    )
    p.add_argument(
        "--parallel-reads",
        type=int,
        default=0,
        help="shards read at once by interleave (0: as many as the shards, at most 16)",
    )
    p.add_argument("--shuffle-buffer", type=int, default=1024, help="samples in the shuffle buffer")
    common.switch(p, "--decode", True)
    return p


def pipeline(tf, files: list[str], args: argparse.Namespace, rank: int, replicas: int):
    """The tf.data pipeline of one rank."""
    autotune = tf.data.AUTOTUNE
    if len(files) >= replicas:  # shard by file; a set of fewer shards than ranks is split by record
        names = tf.data.Dataset.from_tensor_slices(files).shard(replicas, rank)
        if args.shuffle:
            names = names.shuffle(len(files), seed=args.seed, reshuffle_each_iteration=True)
        cycle = args.parallel_reads or min(16, max(1, -(-len(files) // replicas)))
        records = names.interleave(
            tf.data.TFRecordDataset, cycle_length=cycle, num_parallel_calls=autotune, deterministic=False
        )
    else:
        records = tf.data.TFRecordDataset(files).shard(replicas, rank)
    if args.shuffle:
        records = records.shuffle(args.shuffle_buffer, seed=args.seed, reshuffle_each_iteration=True)
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(record):
        example = tf.io.parse_single_example(record, features)
        data, label = example["image/encoded"], example["image/class/label"]
        nbytes = tf.strings.length(data, unit="BYTE")
        if not args.decode:
            return data, label, nbytes
        image = tf.io.decode_jpeg(data, channels=3)
        shape = tf.shape(image)
        side = tf.minimum(shape[0], shape[1])
        image = tf.image.crop_to_bounding_box(image, (shape[0] - side) // 2, (shape[1] - side) // 2, side, side)
        image = tf.cast(tf.image.resize(image, [SIZE, SIZE], method="bilinear"), tf.uint8)
        return image, label, nbytes

    batches = records.map(parse, num_parallel_calls=autotune, deterministic=False)
    batches = batches.batch(args.batch_size).prefetch(autotune)
    options = tf.data.Options()
    if args.private_threads:
        options.threading.private_threadpool_size = args.private_threads
    return batches.with_options(options)


def run_rank(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from iolab.errors import UserError
    from iolab.host.dataset.pack import PackInfo
    from iolab.host.loader.dataset_state import sha256_file

    rank, replicas = args.local_rank, args.accelerators
    manifest_hash = sha256_file(args.root / "manifest.jsonl")
    try:
        info = PackInfo.of(args.root, PACK_DIR, manifest_hash)
    except UserError as exc:
        print(exc, file=sys.stderr)
        return 2
    files = [str(args.root / PACK_DIR / name) for name in info.files]
    dataset = pipeline(tf, files, args, rank, replicas)
    mine = files[rank::replicas] if len(files) >= replicas else files  # the shards this rank reads (pipeline)
    done, traced = _steps(args, tf, dataset, mine, rank)
    import numpy

    return common.finish_rank(
        args,
        rank,
        done,
        traced=traced,
        device="cpu",
        pin_memory=False,
        compute_per_batch=args.compute_per_batch,
        # Samples produced while traced (TensorFlow's reads are its own: prefetched ones are not counted).
        samples_read=sum(r[6] for r in done["records"]),
        page_cache_evicted=args.evict,
        gpu=None,
        versions={"python": platform.python_version(), "tensorflow": tf.__version__, "numpy": numpy.__version__},
        dataset={
            "root": str(args.root),
            "manifest_hash": manifest_hash,
            "samples": info.samples,
            "bytes": info.bytes,
            "reader": "tfrecord",
            "shards": len(files),
        },
    )


def _steps(args: argparse.Namespace, tf, dataset, mine: list[str], rank: int) -> tuple[dict, bool]:
    """The rank's steps over `dataset` (common.run_steps), traced where asked; and whether they were traced."""

    def evict() -> None:
        """With --evict, drop the rank's shards (`mine`) from the page cache: tf.data reads them in its own threads,
        so what an epoch read goes before the next epoch starts, and after the last."""
        if args.evict:
            for path in mine:
                common.drop_file(path)

    def epoch_batches(_: int):
        evict()
        return iter(dataset)

    tracer = common.syscall_tracer(args, rank)
    try:
        done = run_steps(
            args.epochs,
            args.steps,
            epoch_batches,
            size=lambda batch: (int(batch[1].shape[0]), int(tf.reduce_sum(batch[2]))),
            compute=None,
            compute_per_batch=args.compute_per_batch,
        )
    finally:
        if tracer:
            tracer.stop()
    evict()
    return done, tracer is not None


def main(argv: list[str] | None = None) -> int:
    return common.main("iolab.kinds.tensorflow.host", parser, run_rank, argv)


if __name__ == "__main__":
    sys.exit(main())
