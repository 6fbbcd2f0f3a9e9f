"""Campaign entries that stand for other workloads: `type: mlperf` (a preset) and `type: dlio` (a DLIO file).

    {name: u,  type: mlperf, workload: unet3d, accelerator: h100, accelerators: 2}
    {name: ck, type: dlio, config: llama3_8b.yaml, scale: 0.01}

`expand(data, base_dir)` replaces them, before the campaign is validated, by the pytorch,
tensorflow or checkpoint workload they describe; other keys of the entry override what the
preset or the file says. The campaign's data set must be the kind they read; a `type: dlio`
entry gives the campaign its file's data set when the campaign has none.

`dataset: {files: auto}` sizes the data set by MLPerf's rule (mlperf.required_samples) for the
campaign's MLPerf workloads — the largest batch × accelerators among them — and the RAM of
the hosts the command selected, which `bench.all` reads from each host's /proc/meminfo.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.kinds.dlio import workload as dlio
from iolab.workloads import mlperf

STANDS_FOR = ("mlperf", "dlio")


def expand(data: dict[str, Any], base_dir: Path, memory: mlperf.HostMemory | None = None) -> dict[str, Any]:
    """The campaign mapping with its mlperf and dlio entries expanded, `files: auto` sized by the hosts' `memory`
    (bytes each), calibrated accelerators read from their profiles (iolab.campaign.profiles.resolve) and real ones given
    their two legs (iolab.campaign.gpus.legs); ValueError naming the entry and key."""
    from iolab.campaign import gpus, profiles
    from iolab.errors import UserError

    try:
        data = gpus.legs(profiles.resolve(data, base_dir))
    except UserError as exc:
        raise ValueError(str(exc)) from None
    workloads = data.get("workloads")
    if not isinstance(workloads, list):
        return data
    data = dict(data)
    out = []
    for index, entry in enumerate(workloads):
        if not isinstance(entry, dict) or entry.get("type") not in STANDS_FOR:
            out.append(entry)
            continue
        where = f"workloads[{index}]"
        try:
            if entry["type"] == "dlio":
                entry, data = _from_file(entry, data, base_dir)
            if entry["type"] == "mlperf":
                entry = mlperf.expand(entry)
        except ValueError as exc:
            raise ValueError(f"{where}.{exc}") from None
        model = entry.get("mlperf")
        dataset = data.get("dataset")
        if model is not None:
            wanted = mlperf.PRESETS[model].dataset
            if not isinstance(dataset, dict):
                raise ValueError(
                    f"{where}: MLPerf's {model} reads a {wanted} data set: add "
                    f"dataset: {{kind: {wanted}, files: N, seed: S}}"
                )
            if dataset.get("kind", "imagenet-like") != wanted:
                raise ValueError(
                    f"{where}: MLPerf's {model} reads a {wanted} data set, the campaign's is "
                    f"{dataset.get('kind', 'imagenet-like')}: one campaign per data set kind"
                )
        out.append(entry)
    data["workloads"] = out
    dataset = data.get("dataset")
    if isinstance(dataset, dict) and dataset.get("files") == "auto":
        data["dataset"] = {**dataset, "files": _auto_files(out, memory)}
    return data


def _auto_files(workloads: list[Any], memory: mlperf.HostMemory | None) -> int:
    """MLPerf's smallest data set for the campaign's MLPerf workloads on the selected hosts."""
    try:
        points = [
            (w["mlperf"], mlperf.largest(w.get("batch_size", 1)), mlperf.largest(w.get("accelerators", 1)))
            for w in workloads
            if isinstance(w, dict) and w.get("mlperf")
        ]
    except ValueError as exc:
        raise ValueError(f"dataset.files: auto: {exc}") from None
    if not points:
        raise ValueError(
            "dataset.files: auto sizes the data set for MLPerf workloads (type: mlperf or dlio); "
            "this campaign has none: give a number of files"
        )
    if memory is None:
        raise ValueError(
            "dataset.files: auto needs the RAM of the hosts, which bench.all reads; give a number of files here"
        )
    ram = memory()
    return max(mlperf.required_samples(model, batch, accelerators, ram) for model, batch, accelerators in points)


def _from_file(entry: dict[str, Any], data: dict[str, Any], base_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A `type: dlio` entry as the workload its file maps to (with the entry's overrides); the campaign too."""
    path = entry.get("config")
    if not isinstance(path, str):
        raise ValueError("config: give the DLIO workload file, e.g. config: unet3d_h100.yaml")
    file = base_dir / path
    try:
        mapped, dataset, repetitions = dlio.workload(dlio.load(file), str(entry.get("name")))
    except dlio.Refused as exc:
        raise ValueError(f"config: {file}: {exc}") from None
    # Under MLPerf's rules (mlperf_rules) one run writes the file's checkpoints, then reads them (mlperf.apply_rules).
    if repetitions is not None and not entry.get("mlperf_rules") and data.get("repetitions", 1) != repetitions:
        raise ValueError(
            f"config: {file} asks for {repetitions} checkpoints (checkpoint.num_checkpoints_write): "
            f"set the campaign's repetitions: {repetitions}"
        )
    if dataset is not None and "dataset" not in data:
        data = {**data, "dataset": dataset}
    overrides = {k: v for k, v in entry.items() if k not in ("type", "config")}
    return {**mapped, **overrides}, data


def campaign_for(path: str | Path, campaign: dict[str, Any]) -> dict[str, Any]:
    """`bench.all --workload-file`: the campaign's backends running the file's one workload (and data set)."""
    file = Path(path)
    try:
        mapped, dataset, repetitions = dlio.workload(dlio.load(file), file.stem.replace("_", "-"))
    except dlio.Refused as exc:
        raise ValueError(f"{file}: {exc}") from None
    out = {k: v for k, v in campaign.items() if k not in ("workloads", "dataset")}
    out["name"] = f"{campaign.get('name')}-{mapped['name']}"
    out["workloads"] = [mapped]
    if dataset is not None:
        out["dataset"] = dataset
    if repetitions is not None:
        out["repetitions"] = repetitions
    return out
