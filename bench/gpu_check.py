"""A GPU host's check: ResNet-50 steps fed by the packed and PIL readers, host-to-device copies, NVML.

    .venv/bin/python bench/gpu_check.py [--files 512] [--batch-size 64] [--steps 20] [--workers 4]
                                        [--root DS] [--size 224] [--copy-mib 256] [--json FILE]

What it does, in order, and what it prints (one line per figure):

1. the data set: --root (with its packed copy), else a fresh ImageNet-shaped one of
   --files JPEGs made in a temporary directory under /var/tmp, packed;
2. per reader (packed, pil): a DataLoader (iolab.loader.readers, --workers processes,
   pinned memory on a GPU) feeding mixed-precision ResNet-50 training steps
   (iolab.loader.resnet) on cuda:0, or on the CPU without a GPU (bfloat16, as the
   tests run it): `images/s` over the steps after the first (which builds the
   kernels), and the GPU's mean utilisation over those steps from NVML;
3. host-to-device copy: a pinned --copy-mib buffer copied to cuda:0 ten times:
   `H2D GB/s` (10^9 bytes a second);
4. NVML: the GPUs it sees, or why it sees none.

Without a CUDA GPU, steps 2's GPU part, 3 and 4 say `skipped` and why, and the
CPU path still runs, so the check itself can be tested on any machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT  # noqa: F401  (puts this checkout's iolab on the path)

from iolab import telemetry

READERS = ("packed", "pil")
COPIES = 10
NVML_INTERVAL = 0.2  # seconds between NVML readings while the steps run


def dataset(args: argparse.Namespace, scratch: Path) -> Path:
    """--root, or a fresh data set of --files JPEGs with its packed copy under `scratch`."""
    from iolab.dataset.gen import gen
    from iolab.dataset.pack import pack

    if args.root:
        return args.root
    root = scratch / "ds"
    gen(root, files=args.files, seed=1)
    pack(root, "packed")
    return root


def train(root: Path, reader: str, args: argparse.Namespace, device, gpu) -> dict:
    """ResNet-50 steps from one reader: images/s after the first step, and NVML's utilisation meanwhile."""
    from torch.utils.data import DataLoader

    from iolab.loader.readers import Samples, collate, worker_init
    from iolab.loader.resnet import Trainer

    samples = Samples(root, reader, size=args.size)
    loader = DataLoader(
        samples,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        collate_fn=collate,
        pin_memory=device.type == "cuda",
        worker_init_fn=worker_init,
        drop_last=True,
        persistent_workers=False,
    )
    trainer = Trainer(device)
    batches = iter(loader)
    first = next(batches)
    trainer.step(first["images"], first["labels"])  # builds the kernels: not timed
    utilisation: list[float] = []
    images, started = 0, time.perf_counter()
    for _ in range(args.steps):
        try:
            batch = next(batches)
        except StopIteration:
            batches = iter(loader)
            batch = next(batches)
        trainer.step(batch["images"], batch["labels"])
        images += len(batch["labels"])
        if gpu is not None:
            utilisation += [g["util"] for g in gpu.snapshot()[:1] if g["util"] is not None]
    seconds = time.perf_counter() - started
    return {
        "reader": reader,
        "device": str(device),
        "steps": args.steps,
        "images": images,
        "images_per_s": images / seconds,
        "gpu_util_pct": statistics.fmean(utilisation) if utilisation else None,
    }


def h2d(device, mib: int) -> dict:
    """GB/s of copies from a pinned host buffer to the GPU (the copy a pinned DataLoader batch makes)."""
    import torch

    host = torch.empty(mib << 20, dtype=torch.uint8).pin_memory()
    target = torch.empty_like(host, device=device)
    target.copy_(host, non_blocking=True)  # the first copy sets up the path: not timed
    torch.cuda.synchronize(device)
    started = time.perf_counter()
    for _ in range(COPIES):
        target.copy_(host, non_blocking=True)
    torch.cuda.synchronize(device)
    seconds = time.perf_counter() - started
    return {"bytes": COPIES * host.numel(), "seconds": seconds, "gb_per_s": COPIES * host.numel() / seconds / 1e9}


def check(args: argparse.Namespace) -> dict:
    import torch

    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    found: dict = {"device": torch.cuda.get_device_name(device) if cuda else "cpu", "skipped": []}
    nvml, handles, found["nvml"] = telemetry.open_nvml()
    gpu = None
    if nvml is not None:
        gpu = telemetry.GpuProbe(nvml, handles, NVML_INTERVAL)
        gpu.start()
    else:
        found["skipped"].append(f"GPU utilisation: {found['nvml']['absent']}")
    if not cuda:
        found["skipped"].append(
            "GPU training steps and host-to-device copies: torch sees no CUDA GPU "
            f"(torch {torch.__version__}); ResNet-50 steps ran on the CPU"
        )
    if cuda:
        torch.backends.cudnn.benchmark = True
    try:
        with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="iolab-gpu-check-") as scratch:
            root = dataset(args, Path(scratch))
            found["training"] = [train(root, reader, args, device, gpu) for reader in READERS]
        found["h2d"] = h2d(device, args.copy_mib) if cuda else None
    finally:
        if gpu is not None:
            gpu.close()
    return found


def report(found: dict) -> list[str]:
    lines = [f"device: {found['device']}"]
    nvml = found["nvml"]
    lines.append(
        f"NVML: {nvml['count']} GPU(s), driver {nvml['driver']}: {', '.join(nvml['names'])}"
        if "absent" not in nvml
        else f"NVML: skipped ({nvml['absent']})"
    )
    for t in found["training"]:
        util = f"{t['gpu_util_pct']:.0f} %" if t["gpu_util_pct"] is not None else "not measured"
        lines.append(
            f"ResNet-50 on {t['device']}, {t['reader']} reader: {t['images_per_s']:.1f} images/s "
            f"({t['images']} images in {t['steps']} steps), GPU util {util}"
        )
    lines.append(
        f"H2D: {found['h2d']['gb_per_s']:.1f} GB/s (pinned, {COPIES} copies of "
        f"{found['h2d']['bytes'] // COPIES >> 20} MiB)"
        if found["h2d"]
        else "H2D: skipped, no CUDA GPU"
    )
    lines += [f"skipped: {reason}" for reason in found["skipped"]]
    return lines


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, help="a data set with its packed copy (default: make one)")
    p.add_argument("--files", type=int, default=512, help="JPEGs of the data set made when there is no --root")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=20, help="timed steps per reader, after one untimed")
    p.add_argument("--workers", type=int, default=4, help="DataLoader worker processes")
    p.add_argument("--size", type=int, default=224, help="image side after decoding (224: ResNet-50's)")
    p.add_argument("--copy-mib", type=int, default=256, help="MiB per host-to-device copy")
    p.add_argument("--json", type=Path, help="also write the figures to this file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for name, low in (("files", 1), ("batch_size", 1), ("steps", 1), ("size", 32), ("copy_mib", 1), ("workers", 0)):
        if getattr(args, name) < low:
            print(f"--{name.replace('_', '-')} must be at least {low}", file=sys.stderr)
            return 2
    if not args.root and args.files < 2 * args.batch_size:
        print(
            f"--files {args.files} is less than two batches of {args.batch_size}: make it at least "
            f"{2 * args.batch_size}, or lower --batch-size",
            file=sys.stderr,
        )
        return 2
    found = check(args)
    print("\n".join(report(found)))
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
