"""The PyTorch data-loading benchmark of one host: DataLoader → emulated or real accelerators → loader.json.

    python -m iolab.kinds.pytorch.host --root DS --out RUN_DIR --reader packed --workers 4 \\
        --batch-size 400 --accelerator emulated --compute-per-batch 0.224 --accelerators 2

The command is a launcher that imports torch once and forks one rank process per
accelerator from itself, and merges what they write into RUN_DIR/loader.json (iolab.host.loader.common,
which also holds the step loop and what its window measures). Each rank has its own
DataLoader with --workers worker processes over its shard of the data set (a
DistributedSampler over all ranks: this host's, or with --distributed every host's),
and per batch computes: sleeps --compute-per-batch (emulated, as DLIO does), or trains
ResNet-50 for real (iolab.host.loader.models) — on its GPU (--accelerator gpu, one rank
per GPU) or on the CPU (--accelerator cpu, what a host without a GPU runs: CI). The ranks
of a real accelerator are one data-parallel job: DistributedDataParallel over
torch.distributed's env:// rendezvous (NCCL between GPUs, gloo on CPUs), this host's
ranks, or with --distributed every host's, so every step all-reduces the model's
gradients and the slowest rank sets the pace, as in data-parallel training. With
--data synthetic a real accelerator trains on a batch made once on its device instead
of the data set (the synthetic ceiling: no loader, no storage), in the same step loop
and window.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Callable, Iterator
from typing import Any

from iolab.host.loader import common
from iolab.host.loader.common import GpuMonitor, run_steps


def parser() -> argparse.ArgumentParser:
    p = common.parser(
        "iolab.kinds.pytorch.host",
        "PyTorch DataLoader throughput, with emulated or real accelerators.",
        "the data set (its manifest.jsonl)",
        ("emulated", "gpu", "cpu"),
    )
    p.add_argument(
        "--reader",
        choices=("pil", "cv2-imread", "cv2-imdecode", "packed", "npz", "s3", "dali"),
        default="packed",
        help="dali: an NVIDIA DALI pipeline instead of the DataLoader (iolab.host.loader.dali_reader)",
    )
    p.add_argument("--workers", type=int, default=2, help="DataLoader worker processes per rank (dali: its threads)")
    p.add_argument(
        "--dali-decoder",
        choices=("auto", "mixed", "cpu"),
        default="auto",
        help="where reader dali decodes: mixed (the rank's GPU), cpu, auto (mixed if torch sees a GPU)",
    )
    p.add_argument(
        "--dali-input",
        choices=("files", "tfrecord"),
        default="files",
        help="what reader dali reads: the data set's files, or its TFRecord pack (root/tfrecord)",
    )
    common.switch(p, "--gds", False, "reader npz: kvikio (cuFile) reads each sample into GPU memory")
    common.switch(p, "--pin-memory", False)
    p.add_argument("--prefetch-factor", type=int, default=2, help="batches in flight per worker")
    common.switch(p, "--decode", True, "decode and resize to 224×224 (--no-decode: raw bytes only)")
    p.add_argument("--preprocess-time", type=float, default=0.0, help="seconds slept per sample after reading")
    p.add_argument("--scale", choices=("full", "tiny"), default="full", help="a real accelerator's model size")
    p.add_argument(
        "--data", choices=("real", "synthetic"), default="real", help="synthetic: a batch made on the device"
    )
    common.switch(p, "--distributed", False, "one DDP job over --nodes hosts (a real accelerator's)")
    p.add_argument("--nodes", type=int, default=1, help="hosts of the distributed job")
    p.add_argument("--node-rank", type=int, default=0, help="this host's index among them")
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=0, help="the rendezvous' port (0: a free one, one host)")
    p.add_argument("--dist-timeout", type=float, default=300.0, help="seconds to wait for every rank")
    return p


# ------------------------------------------------------------------ one rank


def _versions() -> dict[str, str]:
    import numpy
    import PIL
    import torch

    found = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "pillow": PIL.__version__,
    }
    try:
        import cv2

        found["opencv"] = cv2.__version__
    except ImportError:
        pass
    return found


def _accelerator(args: argparse.Namespace, rank: int, world: int) -> tuple[Any, Any]:
    """The rank's device and, for a real accelerator, its ResNet-50 trainer, the job's process group joined (DDP
    when the job has several ranks); else None. SystemExit 2 when this host has fewer CUDA GPUs than ranks."""
    import torch

    if args.accelerator not in ("gpu", "cpu"):  # emulated: the CPU, or with --gds the rank's GPU to read into
        return (torch.device("cuda", args.local_rank) if args.gds else torch.device("cpu")), None
    device = torch.device("cpu")
    if args.accelerator == "cpu":  # the host's cores shared by its ranks: more threads than cores only wait
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // args.accelerators))
    if args.accelerator == "gpu":
        if not torch.cuda.is_available() or torch.cuda.device_count() < args.accelerators:
            found = torch.cuda.device_count() if torch.cuda.is_available() else 0
            needs = f"accelerator gpu needs {args.accelerators} CUDA GPU(s) on this host"
            print(f"{needs}; torch sees {found}", file=sys.stderr)
            raise SystemExit(2)
        device = torch.device("cuda", args.local_rank)
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    from iolab.host.loader.models import Trainer

    _rendezvous(args, rank, world, device)
    return device, Trainer("resnet50", device, args.scale, ddp=world > 1)


def _rendezvous(args: argparse.Namespace, rank: int, world: int, device: Any) -> None:
    """Join the job's process group through env:// (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK): NCCL between GPUs,
    gloo on CPUs."""
    from datetime import timedelta

    import torch.distributed as dist

    os.environ.update(
        MASTER_ADDR=args.master_addr, MASTER_PORT=str(args.master_port), WORLD_SIZE=str(world), RANK=str(rank)
    )
    dist.init_process_group(
        "nccl" if device.type == "cuda" else "gloo",
        init_method="env://",
        timeout=timedelta(seconds=args.dist_timeout),
        **({"device_id": device} if device.type == "cuda" else {}),
    )


def _synthetic(args: argparse.Namespace, trainer: Any, shard: int) -> Callable[[int], Iterator[Any]]:
    """A real accelerator's synthetic leg: each epoch the steps its shard of the data set would take, every one on
    the same batch, made once on the device."""
    x, y = trainer.synthetic(args.batch_size, seed=args.seed)
    steps = max(1, -(-shard // args.batch_size))
    if args.steps:
        steps = min(steps, args.steps)

    def epoch(_: int) -> Iterator[Any]:
        for _ in range(steps):
            yield {"x": x, "y": y}

    return epoch


def _batches(
    args: argparse.Namespace, device: Any, pin: bool, rank: int, replicas: int
) -> tuple[Any, Callable[[int], Iterator[Any]]]:
    """The rank's data set (its shard of `replicas`) and what iterates one epoch of its batches: kvikio's reads into
    the GPU (--gds), a DALI pipeline (reader dali), else a DataLoader over a DistributedSampler."""
    if args.gds:
        return _gds_batches(args, device, rank, replicas)
    if args.reader == "dali":
        return _dali_batches(args, device, rank, replicas)
    return _loader_batches(args, pin, rank, replicas)


def _gds_batches(
    args: argparse.Namespace, device: Any, rank: int, replicas: int
) -> tuple[Any, Callable[[int], Iterator[Any]]]:
    from iolab.host.loader.decode import NPZ_SIDE
    from iolab.host.loader.gds_reader import GdsBatches

    source = GdsBatches(
        args.root,
        batch_size=args.batch_size,
        device=device,
        shard=rank,
        shards=replicas,
        seed=args.seed,
        side=NPZ_SIDE,
    )
    return source, source.epoch


def _dali_batches(
    args: argparse.Namespace, device: Any, rank: int, replicas: int
) -> tuple[Any, Callable[[int], Iterator[Any]]]:
    import torch

    from iolab.host.loader.dali_reader import DaliBatches, decoder_for

    decoder = decoder_for(args.dali_decoder, torch.cuda.is_available())
    pipeline = DaliBatches(
        args.root,
        batch_size=args.batch_size,
        threads=max(args.workers, 1),
        decoder=decoder,
        device_id=args.local_rank if decoder == "mixed" or device.type == "cuda" else None,
        shard=rank,
        shards=replicas,
        shuffle=args.shuffle,
        seed=args.seed,
        source=args.dali_input,
    )
    return pipeline, pipeline.epoch


def _loader_batches(
    args: argparse.Namespace, pin: bool, rank: int, replicas: int
) -> tuple[Any, Callable[[int], Iterator[Any]]]:
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    from iolab.host.loader.readers import Samples, collate, worker_init

    dataset = Samples(
        args.root, args.reader, decode=args.decode, preprocess_time=args.preprocess_time, evict=args.evict
    )
    dataset.prepare(args.workers, args.batch_size, args.prefetch_factor)
    sampler: DistributedSampler[int] = DistributedSampler(
        dataset, num_replicas=replicas, rank=rank, shuffle=args.shuffle, seed=args.seed
    )
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        sampler=sampler,
        num_workers=args.workers,
        collate_fn=collate,
        pin_memory=pin,
        worker_init_fn=worker_init,
        prefetch_factor=args.prefetch_factor if args.workers > 0 else None,
        persistent_workers=args.workers > 0,
    )

    def epoch_batches(epoch: int) -> Iterator[Any]:
        sampler.set_epoch(epoch)
        return iter(loader)

    return dataset, epoch_batches


def _place(args: argparse.Namespace) -> tuple[int, int]:
    """The rank's place in its job and the job's ranks: this host's, or with --distributed every host's."""
    if args.distributed:
        return args.node_rank * args.accelerators + args.local_rank, args.nodes * args.accelerators
    return args.local_rank, args.accelerators


def run_rank(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    rank, replicas = _place(args)
    device, trainer = _accelerator(args, rank, replicas)
    pin = args.pin_memory and device.type == "cuda"  # pinning without a GPU only costs (torch warns)
    dataset, epoch_batches = _batches(args, device, pin, rank, replicas)
    synthetic = trainer is not None and args.data == "synthetic"
    if synthetic:
        epoch_batches = _synthetic(args, trainer, -(-len(dataset) // replicas))
    if trainer is not None:
        dist.barrier()  # every rank of the job is ready: start together
    tracer = common.syscall_tracer(args, rank)
    read_before = dataset.samples_read  # samples counted against the trace: read while it ran
    monitor = GpuMonitor(args.local_rank).__enter__() if device.type == "cuda" else None  # closed after the steps

    def compute(batch: Any) -> None:
        if synthetic:
            trainer.train(batch["x"], batch["y"])
        else:
            trainer.step(batch["images"], batch["labels"])

    try:
        done = run_steps(
            args.epochs,
            args.steps,
            epoch_batches,
            size=(lambda batch: (args.batch_size, 0)) if synthetic else (lambda b: (len(b["labels"]), b["bytes"])),
            compute=compute if trainer is not None else None,
            compute_per_batch=args.compute_per_batch,
        )
    finally:
        traced_reads = dataset.samples_read - read_before
        if tracer:
            tracer.stop()
        if monitor:
            monitor.close()
    if trainer is not None:
        dist.barrier()
        dist.destroy_process_group()
    return common.finish_rank(
        args,
        rank,
        done,
        traced=tracer is not None,
        device=str(device),
        pin_memory=pin,
        compute_per_batch=args.compute_per_batch if trainer is None else None,
        **_fields(
            args,
            dataset,
            trainer,
            replicas,
            samples_read=0 if synthetic else traced_reads,
            gpu=monitor.summary(torch.cuda.get_device_name(device)) if monitor else None,
        ),
    )


def _fields(
    args: argparse.Namespace, dataset: Any, trainer: Any, replicas: int, samples_read: int, gpu: dict | None
) -> dict[str, Any]:
    """A torch rank's own fields of its record (common.finish_rank): what it read, its GPU, its training job, its
    reader, versions and data set."""
    from iolab.host.loader.readers import Samples

    return {
        "samples_read": samples_read,
        # Batches the training loop held every arena slot for, which went through fresh shared memory.
        "batches_copied": dataset.batches_copied if isinstance(dataset, Samples) else None,
        # What it read was dropped from the page cache after each read (DALI reads on its own: never).
        "page_cache_evicted": dataset.evict if isinstance(dataset, Samples) else False,
        "gpu": gpu,
        # A real accelerator's job: its world, and each rank's parameters summed after the last step (equal on
        # every rank when DDP all-reduced the gradients)
        "training": (
            {"world": replicas, "data": args.data, "scale": args.scale, "checksum": trainer.checksum()}
            if trainer is not None
            else None
        ),
        "reader": getattr(dataset, "facts", None),
        "versions": _versions(),
        "dataset": {
            "root": str(args.root),
            "manifest_hash": dataset.manifest_hash,
            "samples": len(dataset),
            "bytes": dataset.total_bytes,
            "reader": args.reader,
        },
    }


def _preload() -> None:
    """What every rank imports, made once in the launcher before it forks them (no CUDA is touched)."""
    import torch.distributed  # noqa: F401

    import iolab.host.loader.readers  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    return common.main("iolab.kinds.pytorch.host", parser, run_rank, argv, preload=_preload)


if __name__ == "__main__":
    sys.exit(main())
