"""The PyTorch data-loading benchmark of one host: DataLoader → emulated or real accelerators → loader.json.

    python -m iolab.host.loader.torch_loader --root DS --out RUN_DIR --reader packed --workers 4 \\
        --batch-size 400 --accelerator emulated --compute-per-batch 0.224 --accelerators 2

The command is a launcher that imports torch once and forks one rank process per
accelerator from itself, and merges what they write into RUN_DIR/loader.json (iolab.host.loader.common,
which also holds the step loop and what its window measures). Each rank has its own
DataLoader with --workers worker processes over its shard of the data set (a
DistributedSampler over all ranks: this host's, or with --distributed every host's),
and per batch computes — sleeps --compute-per-batch (emulated, as DLIO does) or runs a
real ResNet-50 mixed-precision step on its GPU (--accelerator gpu) — then, with
--distributed, joins an all_reduce of one number over every rank of every host
(torch.distributed, gloo): a barrier per step, so the slowest host sets the pace, as
in data-parallel training.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Callable, Iterator
from typing import Any

from iolab.host.loader import common
from iolab.host.loader.common import GpuMonitor, run_steps


def parser() -> argparse.ArgumentParser:
    p = common.parser(
        "iolab.host.loader.torch_loader",
        "PyTorch DataLoader throughput, with emulated or real accelerators.",
        "the data set (its manifest.jsonl)",
        ("emulated", "gpu"),
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
    common.switch(p, "--pin-memory", False)
    p.add_argument("--prefetch-factor", type=int, default=2, help="batches in flight per worker")
    common.switch(p, "--decode", True, "decode and resize to 224×224 (--no-decode: raw bytes only)")
    p.add_argument("--preprocess-time", type=float, default=0.0, help="seconds slept per sample after reading")
    common.switch(p, "--distributed", False, "one job over --nodes hosts (torch.distributed, gloo)")
    p.add_argument("--nodes", type=int, default=1, help="hosts of the distributed job")
    p.add_argument("--node-rank", type=int, default=0, help="this host's index among them")
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29500)
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


def _accelerator(args: argparse.Namespace) -> tuple[Any, Any]:
    """The rank's device and, for --accelerator gpu, its ResNet-50 trainer on that GPU (else None); SystemExit 2
    when this host has fewer CUDA GPUs than ranks."""
    import torch

    if args.accelerator != "gpu":
        return torch.device("cpu"), None
    if not torch.cuda.is_available() or torch.cuda.device_count() < args.accelerators:
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        needs = f"accelerator gpu needs {args.accelerators} CUDA GPU(s) on this host"
        print(f"{needs}; torch sees {found}", file=sys.stderr)
        raise SystemExit(2)
    from iolab.host.loader.resnet import Trainer

    device = torch.device("cuda", args.local_rank)
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = True
    return device, Trainer(device)


def _batches(
    args: argparse.Namespace, device: Any, pin: bool, rank: int, replicas: int
) -> tuple[Any, Callable[[int], Iterator[Any]]]:
    """The rank's data set (its shard of `replicas`) and what iterates one epoch of its batches: a DALI
    pipeline (reader dali), else a DataLoader over a DistributedSampler."""
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    from iolab.host.loader.readers import Samples, collate, worker_init

    if args.reader == "dali":
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


def run_rank(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    from iolab.host.loader.readers import Samples

    local = args.local_rank
    replicas, rank = args.accelerators, local
    if args.distributed:
        replicas, rank = args.nodes * args.accelerators, args.node_rank * args.accelerators + local
    device, trainer = _accelerator(args)
    pin = args.pin_memory and device.type == "cuda"  # pinning without a GPU only costs (torch warns)
    dataset, epoch_batches = _batches(args, device, pin, rank, replicas)
    if args.distributed:
        from datetime import timedelta

        dist.init_process_group(
            "gloo",
            init_method=f"tcp://{args.master_addr}:{args.master_port}",
            world_size=replicas,
            rank=rank,
            timeout=timedelta(seconds=args.dist_timeout),
        )
        dist.barrier()  # every rank of every host is ready: start together
    tracer = common.syscall_tracer(args, rank)
    read_before = dataset.samples_read  # samples counted against the trace: read while it ran
    token = torch.zeros(1)
    monitor = GpuMonitor(local) if trainer is not None else None
    if monitor:
        monitor.__enter__()
    try:
        done = run_steps(
            args.epochs,
            args.steps,
            epoch_batches,
            size=lambda batch: (len(batch["labels"]), batch["bytes"]),
            compute=(lambda batch: trainer.step(batch["images"], batch["labels"])) if trainer else None,
            compute_per_batch=args.compute_per_batch,
            sync=(lambda: dist.all_reduce(token)) if args.distributed else None,
        )
    finally:
        traced_reads = dataset.samples_read - read_before
        if tracer:
            tracer.stop()
        if monitor:
            monitor.__exit__()
    if args.distributed:
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
        samples_read=traced_reads,
        # Batches the training loop held every arena slot for, which went through fresh shared memory.
        batches_copied=dataset.batches_copied if isinstance(dataset, Samples) else None,
        # What it read was dropped from the page cache after each read (DALI reads on its own: never).
        page_cache_evicted=dataset.evict if isinstance(dataset, Samples) else False,
        gpu=({"name": torch.cuda.get_device_name(device), "utilization": monitor.samples} if monitor else None),
        versions=_versions(),
        dataset={
            "root": str(args.root),
            "manifest_hash": dataset.manifest_hash,
            "samples": len(dataset),
            "bytes": dataset.total_bytes,
            "reader": args.reader,
        },
    )


def _preload() -> None:
    """What every rank imports, made once in the launcher before it forks them (no CUDA is touched)."""
    import torch.distributed  # noqa: F401

    import iolab.host.loader.readers  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    return common.main("iolab.host.loader.torch_loader", parser, run_rank, argv, preload=_preload)


if __name__ == "__main__":
    sys.exit(main())
