"""Workload kind `calibrate`: one model's real training step at one batch, the batch already on the device.

`./lab bench.calibrate` makes a campaign of these (one per model and batch) and turns
what each host measured into accelerator profiles (iolab.run.calibration); a campaign may
also name one itself. The host side is iolab.kinds.calibrate.host.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from iolab.workloads.base import LOADER_TIMEOUT, At, HostCall, Workload

MODELS = ("resnet50", "retinanet", "unet3d")  # iolab.host.loader.models.MODELS: what iolab trains


TOOL = "iolab.kinds.calibrate.host"  # what its host call runs on each host (python -m)


class CalibrateWorkload(Workload):
    """One model at one batch: warm-up steps out, then `blocks` timed blocks of `steps` steps (host side:
    iolab.kinds.calibrate.host)."""

    type: Literal["calibrate"]
    host_program: ClassVar[str] = f"python -m {TOOL}"
    model: Literal["resnet50", "retinanet", "unet3d"] = "resnet50"
    batch_size: Annotated[int, Field(ge=1, le=65536)] = 400
    # full: the real model and input; tiny: every width / 8 and a small input (the CPU of CI: the code path only)
    scale: Literal["full", "tiny"] = "full"
    warmup_steps: Annotated[int, Field(ge=0, le=1000)] = 5  # untimed steps first (cuDNN autotuning, compilation)
    steps: Annotated[int, Field(ge=1, le=10000)] = 10
    blocks: Annotated[int, Field(ge=2, le=100)] = 5
    compile: Literal["auto", "on", "off"] = "auto"  # torch.compile on CUDA: auto measures both, keeps the faster

    def role_vars(self, target: str) -> dict[str, Any]:
        return {
            "bench_calibrate_argv": [
                "--batch",
                f"{self.model}:{self.batch_size}",
                "--scale",
                self.scale,
                "--warmup",
                str(self.warmup_steps),
                "--steps",
                str(self.steps),
                "--blocks",
                str(self.blocks),
                "--compile",
                self.compile,
            ],
            "bench_calibrate_timeout": self.run_timeout(LOADER_TIMEOUT),
        }

    def describe(self) -> str:
        return (
            f"{self.model}'s training step at batch {self.batch_size} ({self.scale} scale) on the host's first GPU "
            f"(or its CPU), the batch on the device: {self.warmup_steps} warm-up steps, {self.blocks} blocks of "
            f"{self.steps} timed"
        )


# What the calibrate role takes from the controller, by the name host_call gives it (bench_calibrate_<name>).
CALIBRATE_VARS = ("argv", "timeout")


def host_call(at: At, *, argv: list[str], timeout: float) -> HostCall:
    """A calibration's call on `host` (iolab.kinds.hostcall): no storage and no data set (the batch is made on
    the device), so its prepare only makes the run directory and the caches are left alone, whatever `drop` says."""
    prepare = at.module("iolab.host.prepare", "directory", "--dir", at.run_dir)
    run = at.hostrun("--timeout", str(timeout), "--telemetry-after", "0")
    tool = at.module(TOOL, "--out", at.run_dir, *argv)
    return HostCall(prepare, run, tool, {}, "Create the run directory", "Time the training step", storage_side=False)
