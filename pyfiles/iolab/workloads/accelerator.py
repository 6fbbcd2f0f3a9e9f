"""Emulated accelerators (MLPerf Storage's compute time per batch, or a calibrated device's) and real GPUs."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from iolab.schema import Duration, Model

# Compute time per batch of each MLPerf Storage training workload on each accelerator, at the batch size
# MLPerf gives it (reference_batch), as DLIO sleeps it (docs/REFERENCE_FIGURES.md gives each source).
# resnet50's are the defaults of every pytorch and tensorflow workload's emulated accelerator.
# An accelerator without a published figure for a workload is refused, never guessed.
ACCELERATOR_FIGURES = {"a100": 0.435, "h100": 0.224}
COMPUTE_TIMES: dict[str, dict[str, float]] = {
    "resnet50": ACCELERATOR_FIGURES,
    "unet3d": {"a100": 0.636, "h100": 0.323, "b200": 0.162},
    "cosmoflow": {"a100": 0.00551, "h100": 0.00350},
    "retinanet": {"b200": 0.04755, "mi355": 0.0634},
}
REFERENCE_BATCH = 400
REFERENCE_BATCHES = {"resnet50": REFERENCE_BATCH, "unet3d": 7, "cosmoflow": 1, "retinanet": 24}
# A figure published at another batch than the workload's (MLPerf Storage v3.0's retinanet on MI355).
OWN_BATCHES = {("retinanet", "mi355"): 32}
EMULATED = ("a100", "h100", "b200", "mi355")
# Each emulated accelerator's memory, bytes, as MLPerf Storage v3.0 gives it (its rules, table 3): holds a checkpoint.
ACCELERATOR_MEMORY = {"b200": 180 * 10**9, "mi355": 288 * 10**9, "h100": 80 * 10**9, "a100": 80 * 10**9}


def reference_batch(model: str, kind: str) -> int:
    """The batch size MLPerf's compute time of `model` on `kind` is for (the workload's, unless OWN_BATCHES)."""
    return OWN_BATCHES.get((model, kind), REFERENCE_BATCHES[model])


REAL = ("gpu", "cpu")  # a real training step: on the host's GPUs (NCCL), or on its CPU (gloo; what CI runs)


class Accelerator(Model):
    """Emulated (a100, h100, b200, mi355: the figures of `model`; custom: your compute_per_batch; calibrated: a
    device's own step times, from a bench.calibrate profile) or real (gpu, cpu: ResNet-50 trained for real)."""

    type: Literal["a100", "h100", "b200", "mi355", "custom", "calibrated", "gpu", "cpu"]
    compute_per_batch: Duration | None = None
    # Whose compute times an emulated accelerator takes (an MLPerf Storage training workload); what a calibrated
    # one's profile measured; what a real one trains (ResNet-50: the loader's images).
    model: Literal["resnet50", "unet3d", "cosmoflow", "retinanet"] = "resnet50"
    # type calibrated: the profile (a path relative to the campaign file, or latest); the rest is filled in from
    # it as the campaign loads (iolab.campaign.profiles.resolve): whatever a file says for them is replaced.
    profile: str | None = None
    device: str | None = None
    calibrated_at: str | None = None
    step_times: dict[str, float] | None = None  # seconds per step by batch size
    # A real or calibrated model's size: full (the real model; None says it too, and keeps an emulated accelerator's
    # samples as they were), tiny (every width / 8: a CPU in CI)
    scale: Literal["full", "tiny"] | None = None

    @model_validator(mode="after")
    def _compute(self) -> Accelerator:
        if self.type == "custom" and self.compute_per_batch is None:
            raise ValueError("type custom needs compute_per_batch, e.g. 0.224s")
        if self.type in REAL and self.compute_per_batch is not None:
            raise ValueError(f"type {self.type} trains ResNet-50 for real: it takes no compute_per_batch")
        if self.type in REAL and self.model != "resnet50":
            raise ValueError(
                f"type {self.type} trains ResNet-50 on the loader's images; {self.model}'s step is measured by "
                f"bench.calibrate: use type: calibrated, model: {self.model}"
            )
        if self.type == "calibrated" and self.compute_per_batch is not None:
            raise ValueError("type calibrated takes its step time from its profile: drop compute_per_batch")
        if self.type == "calibrated" and self.step_times is None:
            raise ValueError("type calibrated needs its profile read: name it with profile: FILE or profile: latest")
        if self.type not in ("calibrated", *REAL) and (self.profile or self.step_times or self.scale):
            raise ValueError(f"profile and scale are a calibrated or real accelerator's; type {self.type} has neither")
        if self.type in EMULATED and self.compute_per_batch is None and self.type not in COMPUTE_TIMES[self.model]:
            published = ", ".join(COMPUTE_TIMES[self.model])
            raise ValueError(
                f"MLPerf Storage publishes no {self.type} compute time for {self.model} (it has: "
                f"{published}); use type: custom with compute_per_batch"
            )
        return self

    def compute_time(self, batch_size: int) -> float:
        """Seconds per batch: compute_per_batch as given, a calibrated device's step at this batch (ValueError when
        its profile has none), else the model's figure scaled to batch_size."""
        if self.compute_per_batch is not None:
            return self.compute_per_batch
        if self.step_times is not None:
            if str(batch_size) not in self.step_times:
                measured = ", ".join(sorted(self.step_times, key=int))
                raise ValueError(
                    f"accelerator profile {self.profile} measured {self.model} at batch {measured}, not "
                    f"{batch_size}: set batch_size to one of them or calibrate it (./lab bench.calibrate "
                    f"--models {self.model} --batch-sizes {batch_size})"
                )
            return self.step_times[str(batch_size)]
        figure = COMPUTE_TIMES[self.model].get(self.type, 0.0)
        return figure * (batch_size / reference_batch(self.model, self.type))

    def calibrated_label(self, batch_size: int) -> str:
        """A calibrated accelerator as the report names it: `NVIDIA H200, calibrated 2026-11-28, 69 ms per 400`."""
        step = (self.step_times or {}).get(str(batch_size))
        per = f", {step * 1000:.0f} ms per {batch_size}" if step is not None else ""
        scale = f", {self.scale} scale" if self.scale == "tiny" else ""
        return f"{self.device}, calibrated {(self.calibrated_at or '')[:10]}{per}{scale}"

    @property
    def label(self) -> str:
        """What one of these is called in a line: its type, or a calibrated one's device."""
        return f"{self.device} (calibrated)" if self.type == "calibrated" else self.type
