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
checked on the results (iolab.measures.validity): the data set's size, five recorded repetitions
after a warm-up, a new shuffle seed per repetition, the AU threshold. `lab_scale: true`
says a data set too small for the rules is meant: every sample is then marked
`mlperf_rules_followed: false`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import Field

from iolab.schema import Bool, Model
from iolab.shared.shapes import MEAN_SIZE, SAMPLES_PER_SHARD, SHAPES
from iolab.units import human
from iolab.workloads import kvcache_rules
from iolab.workloads.accelerator import ACCELERATOR_MEMORY, COMPUTE_TIMES, EMULATED, reference_batch

# MLPerf Storage v2's checkpointing models: the whole checkpoint (model and optimizer state) and the
# processes a CLOSED submission writes it with (docs/REFERENCE_FIGURES.md, "Checkpointing").
CHECKPOINT_MODELS = {
    "llama3-8b": (105e9, 8),
    "llama3-70b": (912e9, 64),
    "llama3-405b": (5.29e12, 512),
    "llama3-1t": (18e12, 1024),
}

# MLPerf Storage's rules (docs/REFERENCE_FIGURES.md): a run is five measured repetitions after one
# unrecorded warm-up, and its data set is at least 5 × the clients' RAM and 500 steps of every accelerator.
REPETITIONS = 5
MIN_STEPS = 500


RAM_MULTIPLE = 5  # a data set of at least 5× the clients' RAM defeats their page cache (MLPerf Storage's rule)
AU_THRESHOLD = 90.0  # % AU: MLPerf Storage's for unet3d and resnet50, and iolab's for a workload that names no model


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
        "pytorch", "unet3d", SHAPES["unet3d"][0], 1, AU_THRESHOLD, {"reader": "npz", "workers": 4, "decode": True}
    ),
    "resnet50": Preset(
        "tensorflow",
        "imagenet-like",
        MEAN_SIZE,
        SAMPLES_PER_SHARD,
        AU_THRESHOLD,
        {"private_threads": 8, "decode": False},
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
    if isinstance(model, list):
        raise ValueError(
            f"workload: one MLPerf Storage workload per entry, got {model!r}: write an entry for each "
            "(a campaign reads one data set, so workloads of other data set kinds go in campaigns of their own)"
        )
    if not isinstance(model, str) or model not in PRESETS:
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


# Each selected host's RAM in bytes, asked only when a rule needs it; None for a host not read (a dry run).
HostMemory = Callable[[], list[int | None]]


def required_samples(model: str, batch_size: int, accelerators: int, memory_bytes: Sequence[int | None]) -> int:
    """MLPerf's smallest data set in samples: max(RAM_MULTIPLE (5) × the clients' summed RAM,
    500 steps × batch × the accelerators of every client); `accelerators` per client. A client's RAM is None
    where it was not read (a dry run): the figure is then the least it can be."""
    by_ram = -(-RAM_MULTIPLE * sum(m or 0 for m in memory_bytes) // PRESETS[model].sample_bytes)
    return max(by_ram, MIN_STEPS * batch_size * accelerators * len(memory_bytes))


class MlperfFields(Model):
    """The MLPerf keys of a pytorch or tensorflow workload (set by `type: mlperf` and `type: dlio`)."""

    mlperf: str | None = None  # the MLPerf Storage workload whose rules the results are checked against
    lab_scale: Bool = False  # a data set below MLPerf's size is meant: samples are mlperf_rules_followed: false
    reseed: Bool = False  # a new shuffle seed per repetition: seed + repetition - 1 (MLPerf)
    # What the workload's DLIO file asks for that iolab leaves out, and why (iolab.kinds.dlio.workload): said in the
    # description (--dry-run), never a parameter of the samples.
    file_note: Annotated[str | None, Field(exclude=True)] = None

    def repetition_seed(self, seed: int, repetition: int) -> int:
        return seed + repetition - 1 if self.reseed else seed


# --- MLPerf Storage v3.0's rules as a mode: `mlperf: true` on a workload or on the campaign ----------------------

# The rules iolab applies, by flag, with their number and name in mlcommons/storage's rules document
# (docs/REFERENCE_FIGURES.md, "MLPerf Storage's rules"). The shuffle seed is iolab's reading of
# DLIO's procedure, not a numbered rule.
RULES = {
    "mlperf_lab_scale": "3.1.2 trainingRecalculateDatasetSize",
    "mlperf_dataset_size": "3.1.2 trainingRecalculateDatasetSize",
    "mlperf_repetitions": "2.1.17 runTimestamps",
    "mlperf_warmup": "2.1.17 runTimestamps",
    "mlperf_consecutive": "2.1.18 runTimestampGap",
    "mlperf_au": "3.3.2 trainingAcceleratorUtilizationCheck",
    "mlperf_filesystems": "3.4.2/4.4.2 trainingMlpstorageFilesystemCheck, checkpointFilesystemCheck",
    "mlperf_cache_cleared": "4.3.1 checkpointDataSizeRatio",
    "mlperf_fsync": "4.3.2 checkpointFsyncVerification",
    "mlperf_accelerator_memory": "4.3.4 checkpointAggregateAcceleratorMemory",
    "mlperf_processes": "4.6.1 checkpointClosedMpiProcesses",
    "mlperf_per_host": "4.6.2 checkpointClosedAcceleratorsPerHost",
    "mlperf_checkpoints": "4.7.1 checkpointCacheFlushValidation",
    "mlperf_read_gap": "4.7.1 checkpointCacheFlushValidation",
    "mlperf_kv_option": "6.3.1.1 kvcacheFixedWorkloadPerOption",
    "mlperf_kv_sequence": "6.3.2.1 kvcacheClosedSequenceLocks",
    "mlperf_kv_cpu_tier": "6.3.4.4 kvcacheLatencyValidity",
    "mlperf_kv_fixed": "6.6.1 kvcacheClosedImmutable",
    "mlperf_kv_filesystems": "6.4.1 kvcachePosixCacheDir",
}
CHECKPOINTS = 10  # written, each ending in fsync, then read back
CACHE_MULTIPLE = 3  # a client that writes less than 3× its RAM has its caches cleared before the read
READ_GAP_S = 30.0  # the read starts within 30 s of the write's end
MIN_PER_HOST = 4  # simulated accelerators (processes) on each host


def rule_of(flag: str) -> str:
    """'rule 4.7.1 (checkpointCacheFlushValidation)' for an MLPerf flag; '' for one without a number."""
    number, _, name = RULES.get(flag, "").partition(" ")
    return f"rule {number} ({name})" if number else ""


def apply_rules(data: dict[str, Any], memory: HostMemory | None) -> dict[str, Any]:
    """The campaign mapping (its entries already expanded) with what `mlperf_rules` asks filled in where the file
    leaves it: 5 repetitions after a warm-up (training), 10 checkpoints of the model's process count; ValueError
    naming the entry when its data set is below the rules' size for the hosts' RAM (`memory()`, bytes each)."""
    workloads = data.get("workloads")
    if not isinstance(workloads, list):
        return data
    out, training = [], False
    for index, entry in enumerate(workloads):
        if not isinstance(entry, dict) or not entry.get("mlperf_rules"):
            out.append(entry)
            continue
        if entry.get("type") == "checkpoint":
            model = entry.get("model", "llama3-8b")  # a sweep of models keeps its writers: flagged if not MLPerf's
            processes = CHECKPOINT_MODELS[model][1] if isinstance(model, str) and model in CHECKPOINT_MODELS else None
            wide = {} if "writers" in entry or "ranks" in entry or processes is None else {"ranks": processes}
            out.append({"checkpoints": CHECKPOINTS, **wide, **entry})
        elif entry.get("type") == "kvcache":
            out.append(kvcache_rules.apply(entry))
        elif entry.get("mlperf") in PRESETS:
            training = True
            if not entry.get("lab_scale"):
                _dataset_size_rule(f"workloads[{index}]", entry, data.get("dataset"), memory)
            out.append({"warmup": True, **entry})
        else:
            raise ValueError(
                f"workloads[{index}]: mlperf: true applies MLPerf Storage's rules to its workloads (type: mlperf, "
                f"dlio, checkpoint or kvcache); {entry.get('type')!r} has none"
            )
    if training and "repetitions" not in data:
        data = {**data, "repetitions": REPETITIONS}
    return {**data, "workloads": out}


def _dataset_size_rule(where: str, entry: dict[str, Any], dataset: Any, memory: HostMemory | None) -> None:
    """Rule 3.1.2 before anything runs: the data set holds MLPerf's smallest for the selected hosts' RAM."""
    files = dataset.get("files") if isinstance(dataset, dict) else None
    if not isinstance(files, int) or isinstance(files, bool):
        return  # the campaign's own check names a missing or wrong data set
    if memory is None:
        raise ValueError(
            f"{where}: mlperf: true sizes the data set by the hosts' RAM, which bench.all reads; "
            "run it there, or give lab_scale: true"
        )
    ram = memory()
    batch, accelerators = (largest(entry.get(key, 1)) for key in ("batch_size", "accelerators"))
    needed = required_samples(entry["mlperf"], batch, accelerators, ram)
    if files < needed:
        known = None not in ram
        of_ram = f"{sum(m or 0 for m in ram) >> 30} GiB of RAM" if known else "whatever their RAM: a dry run reads none"
        raise ValueError(
            f"{where}: mlperf: true: the data set has {files:,} files; MLPerf Storage's "
            f"{rule_of('mlperf_dataset_size')} asks for {'' if known else 'at least '}{needed:,} on the "
            f"{len(ram)} selected host(s) ({of_ram}): "
            "give dataset files: auto (or more), or lab_scale: true for a smaller one, flagged"
        )


def largest(value: Any) -> int:
    """A key's value, or the largest point of its sweep (a list): the data set must hold the largest."""
    values = value if isinstance(value, list) else [value]
    try:
        return max(int(v) for v in values)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a whole number") from None


def _same_filesystem(host_facts: dict[str, Any]) -> bool | None:
    """Whether the data (the target's mount) and the run's results are on one file system; None: not recorded."""
    data, results = host_facts.get("mount") or {}, host_facts.get("results_mount") or {}
    if not data.get("target") or not results.get("target"):
        return None
    return (data["target"], data.get("source")) == (results["target"], results.get("source"))


def host_rules(meta: dict[str, Any], params: dict[str, Any], host: str) -> list[tuple[str, str]]:
    """(flag, why) for each of MLPerf's rules one host's run breaks, from its metadata: where the data and the
    results lie, and a checkpoint's count, fsync, cache clearing and read gap. Only under `mlperf_rules`."""
    if not params.get("mlperf_rules"):
        return []
    host_facts = meta.get("host") or {}
    broken = []
    same = _same_filesystem(host_facts)
    if same is not False:
        mount = (host_facts.get("mount") or {}).get("target")
        broken.append(
            (
                "mlperf_kv_filesystems" if "kv_ranks" in meta else "mlperf_filesystems",  # the KV cache's own rule
                f"{host}: the data ({mount}) and the run's results are on one file system"
                if same
                else f"{host}: where the data and the results lie was not recorded",
            )
        )
    if "checkpoint_count" in meta:
        broken += _checkpoint_host_rules(meta, host_facts, host)
    broken += [(flag, f"{host}: {why}") for flag, why in kvcache_rules.result_rules(meta, params)]
    return broken


def _checkpoint_host_rules(meta: dict[str, Any], host_facts: dict[str, Any], host: str) -> list[tuple[str, str]]:
    broken = []
    counts = meta["checkpoint_count"]
    if counts.get("write") != CHECKPOINTS or counts.get("read") != CHECKPOINTS:
        broken.append(
            (
                "mlperf_checkpoints",
                f"{host}: {counts.get('write')} checkpoint(s) written and {counts.get('read')} read; "
                f"MLPerf asks for {CHECKPOINTS} written, then {CHECKPOINTS} read",
            )
        )
    if not meta.get("checkpoint_fsync"):
        broken.append(("mlperf_fsync", f"{host}: the checkpoint writes did not end in fsync"))
    written = (meta.get("checkpoint") or {}).get("write", {}).get("bytes", 0) * counts.get("write", 0)
    memory = host_facts.get("memory_bytes") or 0
    resident = meta.get("checkpoint_resident_before_read_bytes")
    if not memory or written < CACHE_MULTIPLE * memory:
        cleared = meta.get("cache_state") == "dropped" and resident == 0
        if not cleared:
            why = (
                f"{human(resident, 'B')} of it still in the page cache as the read began (fincore)"
                if resident
                else "the caches were not dropped"
                if meta.get("cache_state") != "dropped"
                else "no record of what the page cache held (fincore missing)"
            )
            broken.append(
                (
                    "mlperf_cache_cleared",
                    f"{host} wrote {human(written, 'B')}, less than {CACHE_MULTIPLE}× its {human(memory, 'B')} of RAM, "
                    "and the read "
                    f"was not cold: {why}",
                )
            )
    gap = meta.get("checkpoint_read_gap_s")
    if gap is None or gap > READ_GAP_S:
        said = "not recorded" if gap is None else f"{gap:.1f} s"
        broken.append(
            (
                "mlperf_read_gap",
                f"{host}: the read began {said} after the write ended; MLPerf asks for ≤ {READ_GAP_S:g} s",
            )
        )
    per_host = (meta.get("checkpoint") or {}).get("write", {}).get("ranks", 0)
    if per_host < MIN_PER_HOST:
        broken.append(
            (
                "mlperf_per_host",
                f"{host} ran {per_host} checkpoint process(es); MLPerf asks for at least {MIN_PER_HOST}",
            )
        )
    return broken


def checkpoint_run_rules(params: dict[str, Any], ranks: int) -> list[tuple[str, str]]:
    """(flag, why) for MLPerf's rules on a checkpoint run's whole job of `ranks` processes: its process count and
    its accelerators' memory against the model's checkpoint. Only under `mlperf_rules`."""
    if not params.get("mlperf_rules") or params.get("model") not in CHECKPOINT_MODELS:
        return []
    model = params["model"]
    size, processes = CHECKPOINT_MODELS[model]
    broken = []
    if ranks != processes:
        broken.append(("mlperf_processes", f"{model}: {ranks} processes in all; MLPerf asks for {processes}"))
    accelerator = params.get("accelerator", "b200")
    memory = ACCELERATOR_MEMORY.get(accelerator, 0) * ranks
    if memory < size:
        broken.append(
            (
                "mlperf_accelerator_memory",
                f"{model}: {ranks} {accelerator} accelerators hold {memory / 1e9:,.0f} GB, less than its "
                f"{size / 1e9:,.0f} GB checkpoint",
            )
        )
    return broken
