"""The one GPU check: calibration, then the loader itself on real data, each run with what limited it; one JSON.

    PYTHONPATH=pyfiles python bench/gpu_check.py [--root DS] [--files 24000] [--batch-size 256] [--workers N]
                                                 [--steps 80] [--compile auto] [--budget 360] [--json FILE]
    PYTHONPATH=pyfiles python bench/gpu_check.py --small        (a CPU's code path: what a unit test runs)

Runs with the machine's own torch and iolab's host side on PYTHONPATH: no network, nothing
installed (`bench/_common.py` puts this checkout's pyfiles on the path). In order:

1. facts: the GPUs NVML sees (driver), torch and CUDA;
2. calibration (iolab.kinds.calibrate.host): ResNet-50's step with the batch already on the
   GPU, at --batch-size and at MLPerf's 400, warm-up out, timed blocks, eager and compiled
   (the faster kept; `--compile off` saves the compilations' minute or two);
3. the data set: --root (with its packed copy), else --files JPEGs generated and packed under
   /var/tmp (kept only for this check);
4. per reader — the synthetic leg first (the loader with `--data synthetic`: its own step
   loop on a batch made on the GPU), then pil, packed and, where NVIDIA DALI imports, dali
   (its mixed decoder on a GPU) — one run of the loader itself at 1 GPU, exactly as a
   campaign runs it (`python -m iolab.kinds.pytorch.host` under `iolab.host.hostrun`
   with host telemetry, after a sync and a drop of the page cache, as a campaign's prepare
   step does: "cache" says whether it could): its images/s and GB/s over its measured window,
   the GPU's utilisation and memory and the host's telemetry over that window, and its
   verdict (iolab.measures.limits.gpu_verdict):
   GPU-bound, client-CPU-bound (decode, with the cores it would need to feed the ceiling) or
   storage-bound, with the evidence.

A stage that would start past --budget seconds (default 360: six minutes) is skipped and
says so. Without a CUDA GPU it runs on the CPU (the loader's `--accelerator cpu`; --small:
the tiny model, a few steps) so the check itself is tested on any machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import ROOT, drop_caches  # ROOT: this checkout, whose iolab _common puts on the path

from iolab.host import gpu_telemetry
from iolab.kinds.pytorch import parser as pytorch
from iolab.measures import limits
from iolab.measures.samples import Sample
from iolab.parsers import telemetry as telemetry_parser

READERS = ("pil", "packed", "dali")
MLPERF_BATCH = 400  # MLPerf Storage's resnet50 batch: the second calibration point
SMALL = {"files": 32, "batch_size": 4, "steps": 3, "workers": 1, "scale": "tiny"}


def facts() -> dict[str, Any]:
    import torch

    nvml, _, info = gpu_telemetry.open_nvml()
    if nvml is not None:
        nvml.nvmlShutdown()
    return {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "nvml": info,
        "cores": os.cpu_count(),
    }


def calibration(args: argparse.Namespace) -> dict[str, Any]:
    from iolab.kinds.calibrate import host as calibrate

    sizes = [args.batch_size] + ([MLPERF_BATCH] if args.scale == "full" and args.batch_size != MLPERF_BATCH else [])
    timing = ["--warmup", "1", "--steps", "2", "--blocks", "2"] if args.scale == "tiny" else []
    batches = sum((["--batch", f"resnet50:{b}"] for b in sizes), [])
    flags = calibrate.parser().parse_args(
        ["--out", "-", *batches, "--scale", args.scale, "--compile", args.compile, *timing]
    )
    return calibrate.run(flags, say=lambda line: print(line, flush=True))


def dataset(args: argparse.Namespace, scratch: Path) -> Path:
    """--root, or a fresh data set of --files JPEGs with its packed copy under `scratch`."""
    from iolab.host.dataset.gen import gen
    from iolab.host.dataset.pack import pack

    if args.root:
        return args.root
    root = scratch / "ds"
    gen(root, files=args.files, seed=1, workers=os.cpu_count() or 1)
    pack(root, "packed")
    return root


def loader_run(root: Path, out: Path, reader: str, data: str, args: argparse.Namespace, cuda: bool) -> list[Sample]:
    """One run of the loader at 1 GPU as a campaign runs it (hostrun, telemetry); its samples as iolab stores them."""
    epochs = 1 + (args.steps * args.batch_size) // args.files_in_root
    argv = [
        *(sys.executable, "-m", "iolab.kinds.pytorch.host", "--root", str(root), "--out", str(out)),
        *("--reader", "packed" if reader == "synthetic" else reader, "--workers", str(args.workers)),
        *("--batch-size", str(args.batch_size), "--steps", str(args.steps), "--epochs", str(epochs)),
        *("--accelerator", "gpu" if cuda else "cpu", "--scale", args.scale, "--data", data),
    ]  # the loader's other settings are a campaign's defaults (no pinned memory, prefetch 2, evict)
    run = [
        *(sys.executable, "-m", "iolab.host.hostrun", "run", "--dir", str(out), "--start-at", str(time.time())),
        *("--target", str(root), "--cwd", str(root), "--timeout", str(args.budget), "--telemetry-after", "0"),
        *("--no-pack", "--profilers", "", "--"),
        *argv,
    ]
    paths = (str(ROOT / "pyfiles"), os.environ.get("PYTHONPATH"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    done = subprocess.run(run, capture_output=True, text=True, env=env)  # the loader's iolab: this checkout's
    if done.returncode != 0:
        tail = (out / "stderr.txt").read_text()[-600:] if (out / "stderr.txt").exists() else done.stderr[-600:]
        raise RuntimeError(f"the loader ({reader}) exited {done.returncode}: {tail.strip()}")
    tool = pytorch.parse(out)
    # as iolab.store.record merges a host's files: the telemetry over the loader's measured window
    found, metadata = telemetry_parser.merge(out, tool.measurements, tool.window)
    metadata = {**tool.metadata, **metadata}
    run = ("gpu-check", reader, 1, "this-host", "local", reader)
    made = [Sample(*run, m.metric, m.value, m.unit, "", "", m.params, metadata) for m in [*tool.measurements, *found]]
    return made


def figures(samples: list[Sample]) -> dict[str, Any]:
    def one(metric: str) -> float | None:
        found = [s.value for s in samples if s.metric == metric and not s.params]
        return found[0] if found else None

    meta = next((s.metadata for s in samples if s.metric == "samples_per_s"), {})
    return {
        "images_per_s": one("steady_samples_per_s"),
        "delivered_images_per_s": one("samples_per_s"),
        "gb_per_s": (one("read_bw") or 0.0) / 1e9,
        "au_pct": one("au"),
        "gpu_util_pct": one("gpu_util"),
        "gpu_mem_used": one("gpu_mem_used"),
        "loader_cores": one("cpu_cores"),
        "steps": meta.get("steps_per_rank"),
        "reader_facts": meta.get("reader_facts"),
    }


def check(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    started = time.monotonic()
    cuda = torch.cuda.is_available()
    found: dict[str, Any] = {"facts": facts(), "skipped": [], "runs": {}}

    def within(stage: str) -> bool:
        spent = time.monotonic() - started
        if spent < args.budget:
            return True
        found["skipped"].append(f"{stage}: the budget of {args.budget:g} s was spent ({spent:.0f} s)")
        return False

    if within("calibration"):
        found["calibration"] = calibration(args)
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="iolab-gpu-check-") as scratch:
        root = dataset(args, Path(scratch))
        args.files_in_root = sum(1 for _ in open(root / "manifest.jsonl"))
        ceiling = None
        for reader in ("synthetic", *READERS):
            if reader == "dali" and (args.small or _no_dali()):
                found["skipped"].append(f"dali: {'--small runs pil and packed' if args.small else _no_dali()}")
                continue
            if not within(reader):
                continue
            out = Path(scratch) / f"run-{reader}"
            cache = _cold()  # the data set was just written: its writeback and cached pages are no run's
            try:
                samples = loader_run(root, out, reader, "synthetic" if reader == "synthetic" else "real", args, cuda)
            except RuntimeError as exc:
                found["runs"][reader] = {"error": str(exc)}
                continue
            run = figures(samples) | {"cache": cache}
            if reader == "synthetic":
                ceiling = run["images_per_s"]
            else:
                run["ratio"] = run["images_per_s"] / ceiling if ceiling and run["images_per_s"] else None
                run["verdict"] = limits.gpu_verdict(samples, ceiling)
            found["runs"][reader] = run
            print(line(reader, run), flush=True)
    found["seconds"] = time.monotonic() - started
    return found


def _cold() -> str:
    """sync and drop the page cache before a run, as a campaign's prepare step does: "dropped", or why not."""
    try:
        drop_caches()
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"not dropped: {exc}"
    return "dropped"


def _no_dali() -> str | None:
    from iolab.host.loader.dali_reader import missing

    return missing()


def line(reader: str, run: dict[str, Any]) -> str:
    util = f"{run['gpu_util_pct']:.0f} %" if run.get("gpu_util_pct") is not None else "not measured"
    text = (
        f"{reader}: {run['images_per_s'] or 0:,.0f} images/s over {run['steps']} measured steps, "
        f"{run['gb_per_s']:.2f} GB/s, GPU util {util}, the loader {run['loader_cores'] or 0:.1f} cores, "
        f"cache {run.get('cache', 'not said')}"
    )
    if "verdict" in run:
        ratio = f"{run['ratio']:.0%} of the ceiling" if run.get("ratio") is not None else "no ceiling"
        text += f"; {ratio}; {run['verdict']['side']}-bound: {run['verdict']['reason']}"
    return text


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, help="a data set with its packed copy (default: make one)")
    p.add_argument("--files", type=int, default=24000, help="JPEGs of the data set made when there is no --root")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=80, help="steps per run (the first one is not measured)")
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1), help="DataLoader workers")
    p.add_argument(
        "--compile", choices=("auto", "on", "off"), default="auto", help="calibration: torch.compile (auto: both timed)"
    )
    p.add_argument("--budget", type=float, default=360.0, help="seconds: a stage that would start later is skipped")
    p.add_argument("--small", action="store_true", help="the tiny model, a few steps: a CPU's code path (tests)")
    p.add_argument("--json", type=Path, help="also write the figures to this file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.scale = "full"
    if args.small:
        for key, value in SMALL.items():
            setattr(args, key, value)
    for name, low in (("files", 1), ("batch_size", 1), ("steps", 2), ("workers", 0)):
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
    text = json.dumps(found, indent=1, default=str)
    if args.json:
        args.json.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
