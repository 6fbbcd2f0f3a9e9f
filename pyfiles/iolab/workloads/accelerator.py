"""Emulated accelerators (MLPerf Storage's compute time per batch) and real GPUs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from iolab.schema import Duration, Model

# resnet50 compute time per batch of 400 samples (MLPerf Storage v1.0, as DLIO runs it;
# docs/REFERENCE_FIGURES.md): the defaults of the emulated accelerators.
ACCELERATOR_FIGURES = {"a100": 0.435, "h100": 0.224}
REFERENCE_BATCH = 400


class Accelerator(Model):
    """Emulated (a100, h100: resnet50's figures; custom: your compute_per_batch) or the host's real GPUs (gpu)."""
    type: Literal["a100", "h100", "custom", "gpu"]
    compute_per_batch: Duration | None = None

    @model_validator(mode="after")
    def _compute(self) -> Accelerator:
        if self.type == "custom" and self.compute_per_batch is None:
            raise ValueError("type custom needs compute_per_batch, e.g. 0.224s")
        if self.type == "gpu" and self.compute_per_batch is not None:
            raise ValueError("type gpu trains ResNet-50 for real: it takes no compute_per_batch")
        return self

    def compute_time(self, batch_size: int) -> float:
        """Seconds per batch: compute_per_batch as given, else the figure for 400 scaled to batch_size."""
        if self.compute_per_batch is not None:
            return self.compute_per_batch
        return ACCELERATOR_FIGURES.get(self.type, 0.0) * batch_size / REFERENCE_BATCH
