"""Emulated accelerators (MLPerf Storage's compute time per batch) and real GPUs."""

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


class Accelerator(Model):
    """Emulated (a100, h100, b200, mi355: the figures of `model`; custom: your compute_per_batch) or real GPUs."""

    type: Literal["a100", "h100", "b200", "mi355", "custom", "gpu"]
    compute_per_batch: Duration | None = None
    # Whose compute times an emulated a100/h100/b200/mi355 takes (an MLPerf Storage training workload).
    model: Literal["resnet50", "unet3d", "cosmoflow", "retinanet"] = "resnet50"

    @model_validator(mode="after")
    def _compute(self) -> Accelerator:
        if self.type == "custom" and self.compute_per_batch is None:
            raise ValueError("type custom needs compute_per_batch, e.g. 0.224s")
        if self.type == "gpu" and self.compute_per_batch is not None:
            raise ValueError("type gpu trains ResNet-50 for real: it takes no compute_per_batch")
        if self.type in EMULATED and self.compute_per_batch is None and self.type not in COMPUTE_TIMES[self.model]:
            published = ", ".join(COMPUTE_TIMES[self.model])
            raise ValueError(
                f"MLPerf Storage publishes no {self.type} compute time for {self.model} (it has: "
                f"{published}); use type: custom with compute_per_batch"
            )
        return self

    def compute_time(self, batch_size: int) -> float:
        """Seconds per batch: compute_per_batch as given, else the model's figure scaled to batch_size."""
        if self.compute_per_batch is not None:
            return self.compute_per_batch
        figure = COMPUTE_TIMES[self.model].get(self.type, 0.0)
        return figure * (batch_size / reference_batch(self.model, self.type))
