"""Workload type `mlperf`: MLPerf Storage's training workloads as presets, expanded into pytorch or tensorflow.

    {name: u, type: mlperf, workload: unet3d, accelerator: h100, accelerators: 2, workers: 8}

becomes the pytorch (or tensorflow) workload the preset describes — its framework, reader,
batch size and the accelerator's compute time for that workload — with any other key of
that kind overriding the preset's value. The campaign's data set must be the workload's
kind (`dataset: {kind: unet3d, files: N, seed: S}`). Figures have one home each: compute
times and batch sizes in `workloads.accelerator`, sample sizes in `shared.shapes`
(unet3d, cosmoflow, retinanet; `MEAN_SIZE` for resnet50), AU thresholds here. v2.0's
workloads (unet3d, resnet50, cosmoflow) and v3.0's (unet3d, retinanet, on B200 and MI355)
are all here; an accelerator without a published figure for a workload is refused.

MLPerf's rules travel with the expanded workload (`mlperf:` names the preset) and are
checked on the results (iolab.validity): the data set's size, five recorded repetitions
after a warm-up, a new shuffle seed per repetition, the AU threshold. `lab_scale: true`
says a data set too small for the rules is meant: every sample is then marked
`mlperf_valid: false`.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from pydantic import Field

from iolab.schema import Model
from iolab.shared.shapes import MEAN_SIZE, SAMPLES_PER_SHARD, SHAPES
from iolab.workloads.accelerator import COMPUTE_TIMES, EMULATED, reference_batch

# MLPerf Storage's rules (docs/REFERENCE_FIGURES.md): a run is five measured repetitions after one
# unrecorded warm-up, and its data set is at least 5 × the clients' RAM and 500 steps of every accelerator.
REPETITIONS = 5
MIN_STEPS = 500


@dataclasses.dataclass(frozen=True)
class Preset:
    """What MLPerf Storage's configuration of one training workload fixes."""

    framework: str  # pytorch or tensorflow: the iolab workload kind it becomes
    dataset: str  # the campaign's dataset kind it reads
    sample_bytes: int  # mean bytes per sample
    samples_per_file: int
    au_threshold: float  # %, the lowest AU a valid run may have
    reader: dict[str, Any]  # the kind's keys that read the data as the configuration does

    def keys(self, model: str, kind: str) -> dict[str, Any]:
        return {"type": self.framework, "batch_size": reference_batch(model, kind), **self.reader}


PRESETS = {
    "unet3d": Preset(
        "pytorch", "unet3d", SHAPES["unet3d"][0], 1, 90.0, {"reader": "npz", "workers": 4, "decode": True}
    ),
    "resnet50": Preset(
        "tensorflow", "imagenet-like", MEAN_SIZE, SAMPLES_PER_SHARD, 90.0, {"private_threads": 8, "decode": False}
    ),
    "cosmoflow": Preset(
        "tensorflow", "cosmoflow", SHAPES["cosmoflow"][0], 1, 70.0, {"decode": False, "shuffle_buffer": 2}
    ),
    # DLIO's JPEG reader opens each image with PIL and decodes it; 8 read threads (v3.0's files).
    "retinanet": Preset(
        "pytorch", "retinanet", SHAPES["retinanet"][0], 1, 85.0, {"reader": "pil", "workers": 8, "decode": True}
    ),
}
# resnet50 also as iolab's PyTorch loader reads it: the JPEG files, one read each, decoded with OpenCV.
PYTORCH_RESNET50 = {"type": "pytorch", "reader": "cv2-imdecode", "workers": 8}
MLPERF_KEYS = ("workload", "accelerator", "framework")


def expand(raw: dict[str, Any]) -> dict[str, Any]:
    """A campaign's `type: mlperf` workload as the pytorch or tensorflow workload it stands for (ValueError if wrong).

    Keys other than workload, accelerator and framework override the preset's.
    """
    model = raw.get("workload")
    if model not in PRESETS:
        raise ValueError(
            f"workload: {model!r} is not an MLPerf Storage training workload iolab knows "
            f"(expected one of: {', '.join(PRESETS)})"
        )
    preset = PRESETS[model]
    published = COMPUTE_TIMES[model]
    kind = raw.get("accelerator", "h100" if "h100" in published else next(iter(published)))
    if kind not in (*EMULATED, "custom"):
        raise ValueError(
            f"accelerator: {kind!r} is not an emulated accelerator (expected one of: "
            f"{', '.join(EMULATED)}, or custom with compute_per_batch: SECONDS)"
        )
    if (kind == "custom") != ("compute_per_batch" in raw):
        raise ValueError("compute_per_batch: give it with accelerator: custom (and only then)")
    if kind != "custom" and kind not in COMPUTE_TIMES[model]:
        raise ValueError(
            f"accelerator: MLPerf Storage publishes no {kind} compute time for {model} "
            f"(it has: {', '.join(COMPUTE_TIMES[model])})"
        )
    keys = preset.keys(model, kind)
    framework = raw.get("framework", preset.framework)
    if framework != preset.framework:
        if model != "resnet50" or framework != "pytorch":
            raise ValueError(f"framework: {model} runs on {preset.framework} only (resnet50 also on pytorch)")
        keys = {"batch_size": keys["batch_size"], **PYTORCH_RESNET50}
    overrides = {k: v for k, v in raw.items() if k not in MLPERF_KEYS and k not in ("type", "compute_per_batch")}
    accelerator = {
        "type": kind,
        "model": model,
        **({"compute_per_batch": raw["compute_per_batch"]} if kind == "custom" else {}),
    }
    return {**keys, "accelerator": accelerator, "reseed": True, "mlperf": model, **overrides}


def required_samples(model: str, batch_size: int, accelerators: int, memory_bytes: list[int], ram_multiple: int) -> int:
    """MLPerf's smallest data set in samples: max(ram_multiple (5) × the clients' summed RAM,
    500 steps × batch × the accelerators of every client); `accelerators` per client."""
    by_ram = -(-ram_multiple * sum(memory_bytes) // PRESETS[model].sample_bytes)
    return max(by_ram, MIN_STEPS * batch_size * accelerators * len(memory_bytes))


class MlperfFields(Model):
    """The MLPerf keys of a pytorch or tensorflow workload (set by `type: mlperf` and `type: dlio`)."""

    mlperf: str | None = None  # the MLPerf Storage workload whose rules the results are checked against
    lab_scale: bool = False  # a data set below MLPerf's size is meant: samples are mlperf_valid: false
    reseed: bool = False  # a new shuffle seed per repetition: seed + repetition - 1 (MLPerf)
    # What the workload's DLIO file asks for that iolab leaves out, and why (iolab.workloads.dlio): said in the
    # description (--dry-run), never a parameter of the samples.
    file_note: Annotated[str | None, Field(exclude=True)] = None

    def repetition_seed(self, seed: int, repetition: int) -> int:
        return seed + repetition - 1 if self.reseed else seed
