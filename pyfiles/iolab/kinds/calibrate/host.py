"""Calibration: the real training step of each model on this host's accelerator, the batch already on it.

    python -m iolab.kinds.calibrate.host --out RUN_DIR --batch resnet50:400 --batch unet3d:7 \\
        [--scale full|tiny] [--warmup 5] [--steps 10] [--blocks 5] [--compile auto|on|off]

The synthetic ceiling of the seeds' method: a batch made once on the device (GPU 0, or
the CPU where torch sees no GPU), trained on again and again (iolab.host.loader.models:
mixed precision, channels-last, SGD), so no loader and no copy from the host is in it.
Per model and batch: `--warmup` untimed steps (cuDNN's autotuning, torch.compile's
compilation), then `--blocks` blocks of `--steps` steps, each block timed on its own;
its figure is the median block's seconds per step, with the fastest and slowest block
(the spread). With `--compile auto`, on CUDA both eager and compiled steps are
measured and the faster kept (both are recorded); on the CPU compilation is off (it
costs more than it gives to a tiny model, and the CPU figure is for the code path).
Writes RUN_DIR/calibration.json: what the device is (GPU model and count, driver,
torch and CUDA versions, or the CPU's model and cores) and one entry per model and
batch — what iolab.run.calibration turns into an accelerator profile. At most once a second it
prints its time to go, from the steps timed so far (`Eta`), which the campaign's live line shows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

KIND = "iolab.calibration/1"


def batches(specs: list[str]) -> list[tuple[str, int]]:
    """`model:batch` items → (model, batch) pairs, in order, each once; ValueError naming a bad one."""
    from iolab.host.loader.model_shapes import MODELS

    out: list[tuple[str, int]] = []
    for spec in specs:
        model, _, size = spec.partition(":")
        if model not in MODELS or not size.isdigit() or int(size) < 1:
            raise ValueError(f"--batch {spec!r}: give MODEL:BATCH, MODEL one of {', '.join(MODELS)}, BATCH ≥ 1")
        if (model, int(size)) not in out:
            out.append((model, int(size)))
    return out


def device_facts(device: Any) -> dict[str, Any]:
    """What the step ran on: the GPU's model, how many the host has, the driver; or the CPU's model and cores."""
    import torch

    from iolab.host import facts, gpu_telemetry

    found: dict[str, Any] = {"torch": torch.__version__, "host": platform.node()}
    if device.type == "cuda":
        nvml, _, info = gpu_telemetry.open_nvml()
        if nvml is not None:
            nvml.nvmlShutdown()
        found |= {
            "device": "cuda",
            "name": torch.cuda.get_device_name(device),
            "count": torch.cuda.device_count(),
            "driver": info.get("driver"),
            "cuda": torch.version.cuda,
            "memory": torch.cuda.get_device_properties(device).total_memory,
        }
    else:
        found |= {"device": "cpu", "name": facts.cpu_model(), "count": os.cpu_count() or 1, "driver": None}
    return found


class Eta:
    """The time to go from the steps timed so far, said at most once a second on stdout as `iolab-calibrate:
    eta_s=42.0` (iolab.host.live puts it in live.json, the campaign's live line shows it): the pair running at its
    steps' mean pace so far (warm-up steps in: the guess falls as a slow first step is averaged out), and each pair
    still to come as long as the pairs before it took (this one's whole, as guessed, while none has ended)."""

    def __init__(self, pairs: int, steps_per_pair: int, say: Any, clock: Any = time.monotonic):
        self.pairs, self.per_pair, self.say, self.clock = pairs, steps_per_pair, say, clock
        self.ended: list[float] = []  # seconds of each pair's steps
        self.steps: list[float] = []  # the running pair's
        self.said_at: float | None = None

    def step(self, seconds: float) -> None:
        self.steps.append(seconds)
        now = self.clock()
        if self.said_at is None or now - self.said_at >= 1.0:
            self.said_at = now
            self.say(f"iolab-calibrate: eta_s={self.seconds():.1f}")

    def pair_ended(self) -> None:
        self.ended.append(sum(self.steps))
        self.steps = []

    def seconds(self) -> float:
        pairs, left = list(self.ended), 0.0
        if self.steps:
            whole = sum(self.steps) / len(self.steps) * self.per_pair
            pairs.append(whole)
            left = whole - sum(self.steps)
        return max(0.0, left) + (self.pairs - len(pairs)) * sum(pairs) / max(1, len(pairs))


def _quiet(seconds: float) -> None:
    """An Eta for a measure that reports to no one."""


def measure(trainer: Any, batch: int, warmup: int, steps: int, blocks: int, tick: Any = _quiet) -> dict[str, Any]:
    """Warm-up steps out, then `blocks` timed blocks of `steps` steps on one synthetic batch; `tick(seconds)` after
    each step."""
    x, y = trainer.synthetic(batch)
    for _ in range(warmup):
        started = time.perf_counter()
        trainer.train(x, y)
        tick(time.perf_counter() - started)
    per_step = []
    for _ in range(blocks):
        started = time.perf_counter()
        for _ in range(steps):
            begun = time.perf_counter()
            trainer.train(x, y)
            tick(time.perf_counter() - begun)
        per_step.append((time.perf_counter() - started) / steps)
    median = statistics.median(per_step)
    return {
        "block_s": per_step,
        "step_s": median,
        "step_s_min": min(per_step),
        "step_s_max": max(per_step),
        "spread_pct": 100 * (max(per_step) - min(per_step)) / median,
        "samples_per_s": batch / median,
    }


def modes(device: Any, compile: str) -> list[bool]:
    """Whether each measurement of a pair is compiled: eager; on CUDA compiled too (auto) or instead (on)."""
    if device.type == "cuda" and compile in ("auto", "on"):
        return [True] if compile == "on" else [False, True]
    return [False]


def calibrate_one(model: str, batch: int, device: Any, args: argparse.Namespace, tick: Any = _quiet) -> dict[str, Any]:
    """One model at one batch: eager, and compiled where asked (the faster kept, both recorded)."""
    import torch

    from iolab.host.loader.models import Trainer

    tried = {}
    for compiled in modes(device, args.compile):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        trainer = Trainer(model, device, args.scale, compile=compiled)
        found = measure(trainer, batch, args.warmup, args.steps, args.blocks, tick)
        if device.type == "cuda":
            found["memory_peak"] = torch.cuda.max_memory_allocated(device)
        tried["compiled" if compiled else "eager"] = found
        del trainer
    best = min(tried, key=lambda mode: tried[mode]["step_s"])
    return {
        "model": model,
        "batch": batch,
        "scale": args.scale,
        "amp": "float16" if device.type == "cuda" else "bfloat16",
        "compile": best == "compiled",
        **tried[best],
        "modes": tried,
    }


def _say(line: str) -> None:
    print(line, flush=True)  # at once: iolab.host.live reads the last status line of the tool's stdout


def run(args: argparse.Namespace, say: Any = _say) -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    wanted = batches(args.batch)
    entries: list[dict[str, Any]] = []
    started = time.time()
    eta = Eta(len(wanted), len(modes(device, args.compile)) * (args.warmup + args.steps * args.blocks), say)
    for index, (model, batch) in enumerate(wanted, 1):
        entry = calibrate_one(model, batch, device, args, eta.step)
        entries.append(entry)
        eta.pair_ended()
        say(
            f"calibrate: {model} at batch {batch}: {entry['step_s'] * 1000:.1f} ms per step "
            f"({entry['step_s_min'] * 1000:.1f}–{entry['step_s_max'] * 1000:.1f} over {args.blocks} blocks), "
            f"{entry['samples_per_s']:.0f} samples/s{', compiled' if entry['compile'] else ''} "
            f"[{index} of {len(wanted)}, about {eta.seconds():.0f} s left]"
        )
    return {
        "kind": KIND,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "device": device_facts(device),
        "settings": {
            "scale": args.scale,
            "warmup": args.warmup,
            "steps": args.steps,
            "blocks": args.blocks,
            "compile": args.compile,
        },
        "entries": entries,
        "seconds": time.time() - started,
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m iolab.kinds.calibrate.host", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="directory that receives calibration.json")
    p.add_argument("--batch", action="append", required=True, help="MODEL:BATCH, repeatable (resnet50:400)")
    p.add_argument("--scale", choices=("full", "tiny"), default="full", help="tiny: every width / 8 (CI's CPU)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--steps", type=int, default=10, help="steps per timed block")
    p.add_argument("--blocks", type=int, default=5, help="timed blocks")
    p.add_argument("--compile", choices=("auto", "on", "off"), default="auto", help="torch.compile (CUDA only)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    low = [
        f"--{n} must be at least {m}" for n, m in (("steps", 1), ("blocks", 2), ("warmup", 0)) if getattr(args, n) < m
    ]
    try:
        batches(args.batch)
    except ValueError as exc:
        low.append(str(exc))
    if low:
        print("; ".join(low), file=sys.stderr)
        return 2
    found = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "calibration.json").write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
