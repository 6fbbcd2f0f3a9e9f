"""DLIO (and MLPerf Storage) workload files as iolab workloads: `type: dlio` and `bench.all --workload-file`.

A DLIO workload file is a Hydra YAML document with the sections model, framework, workflow,
dataset, reader, train, checkpoint and metric. `workload(path)` maps one onto iolab: a
training workload onto an MLPerf preset (iolab.workloads.mlperf) with the file's batch size,
threads, epochs and compute time, and its data set; a checkpointing one (llama3) onto a
`checkpoint` workload. Every key is either

- mapped onto an iolab key (MAPPED),
- checked: the file's value must be what iolab does (CHECKED: the preset's sample size,
  samples per file and AU threshold; seeded shuffles; fsync),
- replaced by what iolab decides itself, for the reason given (REPLACED: where data and
  checkpoints go, that iolab generates the data, DLIO's in-memory resize after a read),
- or, in a training file with workflow.checkpoint off, a checkpoint setting DLIO does not use
  either (the same for the evaluation section and batch_size_eval with workflow.evaluation off);
  with it on, a checkpoint DLIO takes only after the last epoch's reads is left out and said
  (the workload's `file_note`, in the dry run), one during training refused naming the key,

or refused: one line naming the file and the key. Nothing in the file is ignored silently.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from iolab import yamlfile
from iolab.workloads.accelerator import COMPUTE_TIMES, reference_batch
from iolab.workloads.base import LOADER_PREPARE_TASK, At, HostCall, loader_call, mpi_key, mpi_tool
from iolab.workloads.mlperf import AU_THRESHOLD, CHECKPOINT_MODELS, PRESETS

# What iolab decides itself instead of the file, and why the file's value has no say.
REPLACED = {
    "dataset.data_folder": "each backend holds the data set at its own place",
    "checkpoint.checkpoint_folder": "each backend holds the checkpoint at its own place",
    "workflow.generate_data": "iolab generates the data set on each backend when it is missing",
    "dataset.record_length_resize": "DLIO resizes in memory after the read; no I/O changes",
    "dataset.record_length_bytes_resize": "DLIO resizes in memory after the read; no I/O changes",
    "model.type": "a label",
    "model.model_size": "the size of the model's own checkpoint, which a training workload does not write",
    "checkpoint.time_between_checkpoints": "iolab's checkpoints are separate runs, further apart than that",
}
# Keys of the llama3 models' description: the checkpoint's size is MLPerf's for the named model.
LLAMA_DESCRIPTION = ("num_layers", "model_datatype", "optimizer_datatype", "parallelism", "transformer", "type")
LLAMA = {"llama_8b": "llama3-8b", "llama_70b": "llama3-70b", "llama_405b": "llama3-405b", "llama_1t": "llama3-1t"}
SECTIONS = ("model", "framework", "workflow", "dataset", "reader", "train", "checkpoint", "evaluation", "metric")
# What DLIO reads only when it evaluates (workflow.evaluation), besides the evaluation section.
EVALUATION_KEYS = ("reader.batch_size_eval", "dataset.num_files_eval", "dataset.num_subfolders_eval")

TOOL = "iolab.kinds.dlio.host"  # what an engine dlio run's host call runs on each host (python -m), under mpirun


class Refused(ValueError):
    """A key of the file iolab cannot honour."""

    def __init__(self, key: str, why: str):
        super().__init__(f"{key}: {why}")


def load(path: str | Path) -> dict[str, Any]:
    """Read a DLIO workload file (bounded: iolab.yamlfile)."""
    raw = yamlfile.load(path, "DLIO workload file", "--workload-file")
    if not isinstance(raw, dict):
        raise ValueError(f"a DLIO workload file is a YAML mapping of sections ({', '.join(SECTIONS)})")
    return raw


def workload(config: dict[str, Any], name: str) -> tuple[dict[str, Any], dict[str, Any] | None, int | None]:
    """(the iolab workload, the data set it reads or None, the repetitions it asks for or None); Refused if not.

    The workload is a raw campaign entry: `type: mlperf` (expanded by iolab.workloads.mlperf) or
    `type: checkpoint`.
    """
    _shape(config)
    keys = _flatten(config)
    model = config.get("model")
    model_name = model.get("name") if isinstance(model, dict) else model
    workflow = config.get("workflow") or {}
    if model_name in LLAMA or (workflow.get("checkpoint") and not workflow.get("train", True)):
        repetitions = _repetitions(keys)
        return _checkpoint(keys, model_name, name), None, repetitions
    return _training(keys, model_name, name)


def _shape(config: dict[str, Any]) -> None:
    """Refuse a section that is not a DLIO section or not of its kind: a mapping; model and framework a name."""
    for section, body in config.items():
        if section not in SECTIONS:
            raise Refused(section, f"not a DLIO section iolab maps (it maps: {', '.join(SECTIONS)})")
        named = body.get("name") if section == "model" and isinstance(body, dict) else body
        if section in ("model", "framework"):
            if not isinstance(named, str):
                key = "model.name" if isinstance(body, dict) else section
                raise Refused(key, "must be a name (e.g. model: unet3d, framework: pytorch)")
        elif not isinstance(body, dict):
            raise Refused(section, f"must be a mapping of keys ({section}: {{key: value}})")


def _number(keys: dict[str, Any], key: str, low: float, whole: bool = False) -> Any:
    """Pop `key` (None if absent): a finite number of at least `low`, a whole one if `whole`; Refused naming the key.

    The value is not echoed: a refusal names the key only.
    """
    value = keys.pop(key, None)
    if value is None:
        return None
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) or value < low:
        hint = " (iolab resolves no ${...} interpolation: write the value)" if "${" in str(value) else ""
        raise Refused(key, f"must be a {'whole ' if whole else ''}number of at least {low:g}{hint}")
    return value


def _counts(keys: dict[str, Any], key: str) -> Any:
    """Pop `key` (None if absent): a whole number, or a list of them (a sweep, counted by iolab.campaign.model)."""
    value = keys.get(key)
    for item in value if isinstance(value, list) and value else [value]:
        _number({key: item}, key, 0, whole=True)
    return keys.pop(key, None)


def _flatten(config: dict[str, Any]) -> dict[str, Any]:
    """{'section.key': value}; `model: unet3d` (a bare name) as model.name."""
    out: dict[str, Any] = {}
    for section, body in config.items():
        if isinstance(body, dict):
            for key, value in body.items():
                out[f"{section}.{key}"] = value
        else:
            out[section if section != "model" else "model.name"] = body
    return out


def _take(keys: dict[str, Any], key: str, default: Any = None) -> Any:
    return keys.pop(key, default)


def _check(keys: dict[str, Any], key: str, wanted: Any, why: str) -> None:
    if key in keys and keys.pop(key) != wanted:
        raise Refused(key, why)


def _done(keys: dict[str, Any]) -> None:
    """Refuse the first key left: neither mapped, checked nor replaced."""
    for key in list(keys):
        if key in REPLACED:
            del keys[key]
    if keys:
        raise Refused(next(iter(keys)), "iolab cannot honour this DLIO key; remove it or run DLIO itself")


def _training(keys: dict[str, Any], model: Any, name: str) -> tuple[dict[str, Any], dict[str, Any], None]:
    if model not in PRESETS:
        raise Refused(
            "model.name",
            f"{model!r} is not a training workload iolab emulates "
            f"(it has: {', '.join(PRESETS)}; llama3 models as checkpointing)",
        )
    preset = PRESETS[model]
    keys.pop("model.name")
    _check(keys, "workflow.train", True, "iolab maps training workloads and llama3 checkpointing")
    note = _other_phases(keys)
    framework = _take(keys, "framework", preset.framework)
    _check(keys, "reader.data_loader", framework, f"the data loader must be the framework ({framework})")
    files, per_file = _data_set(keys, model, framework)
    out: dict[str, Any] = {"name": name, "type": "mlperf", "workload": model}
    if framework != preset.framework:
        out["framework"] = framework
    out |= _compute(keys, model)
    out |= _loader(keys, framework)
    _check(
        keys, "metric.au", preset.au_threshold / 100, f"MLPerf's AU threshold for {model} is {preset.au_threshold:g} %"
    )
    _done(keys)
    if note:
        out["file_note"] = note
    dataset = {"kind": preset.dataset, "files": files * per_file if files else 0, "seed": 1}
    return out, dataset, None


def _data_set(keys: dict[str, Any], model: str, framework: str) -> tuple[int | None, int]:
    """A training file's data set keys, checked against iolab's data set of `model` (its format on `framework`,
    sample size and samples per file): its files and samples per file."""
    preset = PRESETS[model]
    fmt = {
        "unet3d": "npz",
        "resnet50": "tfrecord" if framework == "tensorflow" else "jpeg",
        "cosmoflow": "tfrecord",
        "retinanet": "jpeg",
    }[model]
    _check(keys, "dataset.format", fmt, f"{model} on {framework} reads {fmt} in iolab")
    for key in ("dataset.record_length_bytes", "dataset.record_length"):
        size = _number(keys, key, 0)
        if size is not None and abs(size - preset.sample_bytes) > 0.01 * preset.sample_bytes:
            raise Refused(key, f"iolab's {model} samples are {preset.sample_bytes:,} B on average")
    for key in ("dataset.record_length_bytes_stdev", "dataset.record_length_stdev"):
        keys.pop(key, None)  # the generator's spread is MLPerf's (shared.shapes)
    per_file = _take(keys, "dataset.num_samples_per_file", preset.samples_per_file)
    if per_file != preset.samples_per_file:
        raise Refused(
            "dataset.num_samples_per_file", f"iolab's {model} data set has {preset.samples_per_file} per file"
        )
    return _number(keys, "dataset.num_files_train", 1, whole=True), per_file


def _compute(keys: dict[str, Any], model: str) -> dict[str, Any]:
    """The workload's batch size and accelerator: the published one whose compute time (at that batch size) is the
    file's computation_time, else "custom" with the file's time."""
    out: dict[str, Any] = {}
    seconds = _number(keys, "train.computation_time", 0)
    batch = _counts(keys, "reader.batch_size")
    if batch is not None:
        out["batch_size"] = batch
    if seconds is not None:
        published = [
            a
            for a, s in COMPUTE_TIMES[model].items()
            if abs(s - float(seconds)) < 1e-9 and batch in (None, reference_batch(model, a))
        ]
        if published:
            out["accelerator"] = published[0]
        else:  # out of the table: the file's own time
            out.update(accelerator="custom", compute_per_batch=float(seconds))
    return out


def _loader(keys: dict[str, Any], framework: str) -> dict[str, Any]:
    """The workload's length and its loader's settings on `framework`; the reader's keys iolab's loaders honour as
    they are (seeded shuffles, no mmap, a reshuffle every epoch) checked."""
    out: dict[str, Any] = {}
    for key, target in (("train.epochs", "epochs"), ("train.total_training_steps", "steps")):
        if key in keys:
            out[target] = _counts(keys, key)
    threads = _counts(keys, "reader.read_threads")
    if threads is not None:
        out["workers" if framework == "pytorch" else "parallel_reads"] = threads
    if "reader.computation_threads" in keys:
        if framework != "tensorflow":
            raise Refused("reader.computation_threads", "a tensorflow reader's setting")
        out["private_threads"] = _counts(keys, "reader.computation_threads")
    if "reader.shuffle_size" in keys:
        if framework != "tensorflow":
            raise Refused("reader.shuffle_size", "a tensorflow reader's setting (pytorch shuffles the whole set)")
        out["shuffle_buffer"] = _counts(keys, "reader.shuffle_size")
    if "reader.prefetch_size" in keys:
        out["prefetch_factor"] = _counts(keys, "reader.prefetch_size")
    for key in ("reader.file_shuffle", "reader.sample_shuffle"):
        _check(keys, key, "seed", "iolab shuffles with a seed (a new one per repetition)")
    _check(keys, "reader.dont_use_mmap", True, "iolab's readers never map files")
    _check(keys, "train.seed_change_epoch", True, "iolab's loaders reshuffle every epoch")
    return out


def _other_phases(keys: dict[str, Any]) -> str | None:
    """A training file's evaluation (Refused if on), and its checkpoint: None if off; a note if DLIO takes it only
    after the last epoch's reads (checkpoint_after_epoch ≥ epochs), which iolab leaves out; Refused, naming the
    key, if it fires during training.

    DLIO checkpoints at the end of epoch checkpoint_after_epoch (default 1), then every
    epochs_between_checkpoints, or every steps_between_checkpoints steps when that is set (≥ 0).
    """
    for flag in ("workflow.evaluation", "workflow.do_eval", "workflow.profiling", "workflow.debug"):
        _check(keys, flag, False, "iolab measures training reads only (DLIO's evaluation reads another set)")
    for key in [k for k in keys if k.startswith("evaluation.") or k in EVALUATION_KEYS]:
        del keys[key]  # the settings of an evaluation turned off: DLIO does not use them either
    on = keys.pop("workflow.checkpoint", False)
    if not isinstance(on, bool):
        raise Refused("workflow.checkpoint", "must be True or False")
    steps = keys.pop("checkpoint.steps_between_checkpoints", -1)
    after = keys.pop("checkpoint.checkpoint_after_epoch", 1)
    for key in [k for k in keys if k.startswith("checkpoint.")]:
        del keys[key]  # where and how often: no say once iolab leaves the checkpoint out
    if not on:
        return None  # the settings of a checkpoint turned off: DLIO does not use them either
    instead = (
        "iolab does not checkpoint during training: set workflow.checkpoint False and add a type: checkpoint workload"
    )
    if isinstance(steps, bool) or not isinstance(steps, int) or steps >= 0:
        raise Refused("checkpoint.steps_between_checkpoints", f"checkpoints every so many steps; {instead}")
    values = keys.get("train.epochs", 1)
    epochs = max((v for v in (values if isinstance(values, list) else [values]) if isinstance(v, int)), default=1)
    if isinstance(after, bool) or not isinstance(after, int) or after < epochs:
        raise Refused(
            "checkpoint.checkpoint_after_epoch",
            f"a checkpoint after epoch {after} of {epochs} is taken during training; {instead} (or make it {epochs})",
        )
    when = "once, after the last epoch's reads," if after == epochs else "never"
    return (
        f"the file's checkpoint (checkpoint_after_epoch {after}, {epochs} epochs) fires {when} in DLIO: "
        "iolab leaves it out (a type: checkpoint workload measures checkpoints)"
    )


def _checkpoint(keys: dict[str, Any], model: Any, name: str) -> dict[str, Any]:
    if model not in LLAMA:
        raise Refused("model.name", f"{model!r}: iolab checkpoints MLPerf's llama3 models only ({', '.join(LLAMA)})")
    keys.pop("model.name")
    for key in LLAMA_DESCRIPTION:
        keys.pop(f"model.{key}", None)  # describes the named model, whose checkpoint size MLPerf publishes
    _check(keys, "workflow.checkpoint", True, "a llama3 workload file checkpoints")
    _check(keys, "workflow.train", False, "iolab does not train llama3; it writes and reads its checkpoint")
    _check(keys, "checkpoint.fsync", True, "iolab fsyncs every shard")
    _take(keys, "framework")
    _done(keys)
    return {"name": name, "type": "checkpoint", "model": LLAMA[model], "ranks": CHECKPOINT_MODELS[LLAMA[model]][1]}


def _repetitions(keys: dict[str, Any]) -> int | None:
    """num_checkpoints_write and _read: one iolab run writes and reads one checkpoint, so N of each is N runs."""
    writes = _number(keys, "checkpoint.num_checkpoints_write", 1, whole=True)
    reads = _number(keys, "checkpoint.num_checkpoints_read", 1, whole=True)
    if reads is None:
        reads = writes
    if writes is None:
        writes = reads
    if writes != reads:
        raise Refused(
            "checkpoint.num_checkpoints_read",
            "iolab reads back each checkpoint it writes: make it num_checkpoints_write",
        )
    return writes


# What an MLPerf workload's DLIO prefetches: MLPerf's files set no prefetch_size, so DLIO's default, 2, which is
# also the most MLPerf Storage's CLOSED division allows (0, 1 or 2). It is the rank's: DLIO gives torch
# ceil(2 / read threads) batches per reader thread (mlperf_prefetch_factor).
MLPERF_PREFETCH_SIZE = 2


def mlperf_prefetch_factor(threads: int) -> int:
    """Batches in flight per reader thread in an MLPerf workload's DLIO (torch's prefetch_factor)."""
    return math.ceil(MLPERF_PREFETCH_SIZE / max(threads, 1))


# What DLIO's reader hands the training loop per sample instead of the file's bytes, as MLPerf Storage's own files
# set it (record_length_bytes_resize, v2.0 and v3.0): a 2 MiB array rather than unet3d's 140 MB volume. Without it
# DLIO passes an array of the mean file's size through the DataLoader. retinanet's files set none.
RESIZED = {"unet3d": 2_097_152}


def training_file(
    model: str,
    batch_size: int,
    threads: int,
    prefetch: int | None,
    epochs: int,
    compute: float,
    seed: int | None,
    **more: Any,
) -> dict[str, Any]:
    """The other way: an iolab training workload (`engine: dlio`) as DLIO's workload file, for DLIO to run.

    `prefetch`: batches per reader thread (torch's prefetch_factor, iolab's); DLIO's prefetch_size is the rank's,
    which it divides among its threads. None: MLPerf's (MLPERF_PREFETCH_SIZE). `seed` None: no shuffle. more: steps
    (0: every batch), au_threshold (%). Where the data set is, its format, files and sizes, and where DLIO writes,
    each host adds from its own copy (iolab.kinds.dlio.host.workload_file): the controller does not know them.
    """
    shuffle = "off" if seed is None else "seed"
    train: dict[str, Any] = {"epochs": epochs, "computation_time": compute, "seed": seed or 0}
    if more.get("steps"):
        train["total_training_steps"] = more["steps"]  # DLIO's bound counts each epoch's steps
    reader = {"data_loader": "pytorch", "batch_size": batch_size, "read_threads": threads}
    reader["prefetch_size"] = MLPERF_PREFETCH_SIZE if prefetch is None else prefetch * max(threads, 1)
    return {
        "model": model,
        "framework": "pytorch",
        "workflow": {"generate_data": False, "train": True, "checkpoint": False, "evaluation": False},
        "dataset": {"record_length_resize": RESIZED[model]} if model in RESIZED else {},
        "reader": {**reader, "file_shuffle": shuffle, "sample_shuffle": shuffle},
        "train": train,
        "metric": {"au": more.get("au_threshold", AU_THRESHOLD) / 100},
    }


def main(argv: list[str] | None = None) -> int:
    """python -m iolab.kinds.dlio.workload FILE...: what each DLIO workload file maps to, or the key refused."""
    import sys

    from iolab.errors import UserError

    refused = 0
    for name in sys.argv[1:] if argv is None else argv:
        path = Path(name)
        try:
            mapped, dataset, repetitions = workload(load(path), path.stem.replace("_", "-"))
        except (ValueError, UserError) as exc:
            refused += 1
            print(f"{path.name}: refused: {exc}")
            continue
        extra = (f", data set {dataset}" if dataset else "") + (f", {repetitions} repetitions" if repetitions else "")
        print(f"{path.name}: {mapped}{extra}")
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())


# What the dlio role takes from the controller, by the name host_call gives it (bench_dlio_<name>).
DLIO_VARS = ("target", "dataset", "workload", "ranks", "trace", "timeout", "ssh", "ssh_key", "appear")


def host_call(
    at: At, *, target: str, workload: dict[str, Any], timeout: float, dataset: str = "", trace: bool = False, **mpi: Any
) -> HostCall:
    """An engine dlio run's call on `at.host` (iolab.kinds.hostcall): DLIO, one MPI job over the play's hosts
    (iolab.kinds.dlio.host). The prepare (iolab.kinds.dlio.host prepare) checks the data set, that DLIO is
    installed (the campaign's setup phase installs it) and, on the first host, mpirun's ssh key; then it writes this
    host's DLIO workload file (`workload`, completed from its copy of the data set), makes the run directory and drops
    the caches. The first host runs mpirun over every host, the others wait while their ranks run (`mpi`: ranks,
    ssh, ssh_key, appear, as workloads.base.mpi_tool takes them)."""
    root, _, run = loader_call("dlio", at, target=target, dataset=dataset, timeout=timeout)
    key = mpi_key(at, mpi.get("ssh_key", ""))
    prepare = at.module(TOOL, "prepare", "--host", at.host, "--dir", at.run_dir, "--root", root)
    prepare += ["--workload", json.dumps(workload), *(["--key", key] if key else [])]
    prepare += ["--drop-caches"] if at.drop else []
    tool = mpi_tool(at, TOOL, **{"ranks": 1, "appear": 120.0, **mpi}, launch=("--trace",) if trace else ())
    return HostCall(prepare, run, tool, {}, LOADER_PREPARE_TASK, "Run DLIO (mpirun on the first host)")
