"""Accelerator profiles: the files bench.calibrate writes (iolab.run.calibration), as campaigns and reports read them.

    results/calibration/profiles/<host>-<UTC time>.json      one per host and call of bench.calibrate
    accelerator: {type: calibrated, profile: FILE|latest, model: resnet50}      (a pytorch workload)

A profile holds the device (GPU model and count, driver, torch and CUDA versions, or the
CPU's model and cores) and per model and batch the seconds per step with their spread
and the samples/s. A campaign's `accelerator: {type: calibrated}` is resolved when the
campaign loads (`resolve`, before any host is touched): the profile named (a path,
relative to the campaign file, or `latest`: the newest profile that has the model) is
read and its step times per batch are written into the accelerator, so the run's id
changes with the profile and the loader sleeps the calibrated step per batch (an
emulated accelerator of that device). Refused in one line naming the file and the fix: a
profile that is missing, not a regular file (a FIFO, /dev/zero), over 1 MiB, not JSON, not
a profile, one whose entries lack a model, batch or step time or give a step time that is
not a finite number of seconds in (0, 3600], one without a device; a profile without the
model, and (iolab.workloads.accelerator) a batch it has no figure for.

An emulated search's answer is also given in a profile's device (`side_by_side`): the
search records, when it ends, the newest profile of its model (`recorded`: path, SHA-256
and the step times it converts with) in its answer's metadata, and the report converts
with that one, so a later profile never changes a stored answer.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from iolab.errors import UserError
from iolab.measures.samples import Sample

CAMPAIGN = "calibration"  # bench.calibrate's campaign: its profiles live under results/<CAMPAIGN>/profiles
PROFILE_KIND = "iolab.profile/1"
MAX_BYTES = 1 << 20  # a profile of the three models at a dozen batches each is a few KiB
MAX_STEP_S = 3600.0  # a step over an hour is no device's (a CPU's full-size 3D U-Net takes about a minute)


class _Entry(BaseModel):
    """One model at one batch, as a profile must give it (the rest of an entry is kept as written)."""

    model_config = ConfigDict(extra="allow")
    model: Literal["resnet50", "retinanet", "unet3d"]
    batch: int = Field(ge=1)
    step_s: float = Field(gt=0, le=MAX_STEP_S, allow_inf_nan=False)
    scale: Literal["full", "tiny"] = "full"


class _Profile(BaseModel):
    model_config = ConfigDict(extra="allow")
    kind: Literal["iolab.profile/1"]
    measured_at: str
    device: dict[str, Any]
    entries: list[_Entry] = Field(min_length=1)


def profiles_dir(results: Path) -> Path:
    return results / CAMPAIGN / "profiles"


def load_profile(path: Path, where: str = "accelerator.profile") -> dict[str, Any]:
    """A profile file, or UserError in one line naming it and the fix (see the module)."""
    return _read(path, where)[0]


def _read(path: Path, where: str) -> tuple[dict[str, Any], str]:
    """(the profile, the SHA-256 of its bytes): read bounded, a regular file only, then checked."""
    from iolab import yamlfile

    again = "measure it again (./lab bench.calibrate --hosts HOST) or name another profile"
    if not path.exists() and not path.is_symlink():
        raise UserError(
            f"{where} {path}: no such profile; run ./lab bench.calibrate --hosts HOST first, or name a file "
            f"under {profiles_dir(_results())}"
        )
    text = yamlfile.read_text(path, where, "profile: FILE", MAX_BYTES, "a profile bench.calibrate wrote")
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{where} {path}: not JSON ({exc}); {again}") from None
    if not isinstance(document, dict) or document.get("kind") != PROFILE_KIND:
        raise UserError(
            f"{where} {path}: not an accelerator profile (kind {PROFILE_KIND!r}, written by bench.calibrate)"
        )
    try:
        _Profile.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]).lstrip(".")
        given = "" if first["type"] == "missing" else f" {first['input']!r}"
        raise UserError(f"{where} {path}: {field}{given}: {first['msg'].lower()}; {again}") from None
    return document, hashlib.sha256(text.encode()).hexdigest()


def _results() -> Path:
    from iolab import paths

    return paths.results_root()


def latest(model: str, results: Path | None = None) -> Path | None:
    """The newest profile (by when it was measured, then its name) that has `model`; None when there is none.
    A file there that is no usable profile is refused (UserError naming it), never passed over."""
    found = []
    directory = profiles_dir(results or _results())
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        document = load_profile(path, "profile")
        if any(e["model"] == model for e in document["entries"]):
            found.append((document["measured_at"], path.name, path))
    return max(found)[2] if found else None


def device_label(profile: dict[str, Any]) -> str:
    """The device a profile emulates, as the report names it: the GPU's model, or the CPU's."""
    device = profile["device"]
    return str(device.get("name") or device.get("device") or "unknown device")


def accelerator_fields(profile_path: Path, model: str) -> dict[str, Any]:
    """What a calibrated accelerator carries from its profile (UserError when the profile lacks the model)."""
    return _fields(profile_path, model)[0]


def _fields(profile_path: Path, model: str) -> tuple[dict[str, Any], str]:
    """(accelerator_fields, the profile's SHA-256)."""
    profile, sha256 = _read(profile_path, "accelerator.profile")
    entries = [e for e in profile["entries"] if e["model"] == model]
    if not entries:
        has = ", ".join(sorted({f"{e['model']} (batch {e['batch']})" for e in profile["entries"]}))
        raise UserError(
            f"accelerator.profile {profile_path} holds {has}, not {model}: calibrate it "
            f"(./lab bench.calibrate --models {model}) or name another profile"
        )
    fields = {
        "profile": str(profile_path),
        "device": device_label(profile),
        "calibrated_at": profile["measured_at"],
        "scale": entries[0].get("scale", "full"),
        "step_times": {str(e["batch"]): e["step_s"] for e in entries},
    }
    return fields, sha256


def resolve(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """The campaign mapping with each `accelerator: {type: calibrated}` filled in from its profile (see the
    module); UserError in one line naming the workload when the profile is missing or lacks the model."""
    out = []
    for index, entry, accelerator in _calibrated(data):
        if accelerator is None:
            out.append(entry)
            continue
        model = str(accelerator.get("model", "resnet50"))
        named = str(accelerator.get("profile", "latest"))
        try:
            if named == "latest":
                path = latest(model)
                if path is None:
                    raise UserError(
                        f"accelerator.profile latest: no profile of {model} under {profiles_dir(_results())}; "
                        f"run ./lab bench.calibrate --hosts HOST --models {model} first"
                    )
            else:
                path = Path(named) if Path(named).is_absolute() else (base_dir / named).resolve()
            fields = accelerator_fields(path, model)
        except UserError as exc:
            raise UserError(f"workloads[{index}].{exc}") from None
        out.append({**entry, "accelerator": {**accelerator, "model": model, **fields}})
    return {**data, "workloads": out} if isinstance(data.get("workloads"), list) else data


def standing_in(data: dict[str, Any]) -> dict[str, Any]:
    """The campaign mapping with each calibrated accelerator standing as a custom one of its model: what
    bench.calibrate reads a campaign for (its batch sizes per model) before the profile it makes exists."""
    out = [
        entry
        if accelerator is None
        else {
            **entry,
            "accelerator": {"type": "custom", "compute_per_batch": "1s", "model": accelerator.get("model", "resnet50")},
        }
        for _, entry, accelerator in _calibrated(data)
    ]
    return {**data, "workloads": out} if isinstance(data.get("workloads"), list) else data


def _calibrated(data: dict[str, Any]) -> list[tuple[int, Any, dict[str, Any] | None]]:
    """(index, workload entry, its accelerator when of type calibrated, else None) for each workload entry."""
    workloads = data.get("workloads")
    out = []
    for index, entry in enumerate(workloads if isinstance(workloads, list) else []):
        accelerator = entry.get("accelerator") if isinstance(entry, dict) else None
        calibrated = isinstance(accelerator, dict) and accelerator.get("type") == "calibrated"
        out.append((index, entry, accelerator if calibrated else None))
    return out


def recorded(accelerator: Any, results: Path | None = None) -> dict[str, Any] | None:
    """What an emulated search records, as it ends, of the newest profile of its model (its path, SHA-256 and what
    side_by_side converts with), for its answer's metadata; None for another accelerator, or where no usable profile
    of the model exists then."""
    from iolab.workloads.accelerator import REAL

    if accelerator.type == "calibrated" or accelerator.type in REAL:
        return None
    try:
        path = latest(accelerator.model, results)
        if path is None:
            return None
        fields, sha256 = _fields(path, accelerator.model)
    except UserError:  # a damaged profile costs the answer its side by side, never the answer
        return None
    return {**fields, "sha256": sha256}


def per_sample(step_times: dict[str, float], batch: int) -> tuple[float, int]:
    """(seconds per step at `batch`, the batch it was measured at): that batch's figure, else the largest batch's
    scaled per sample (for the report's side by side only: a campaign is refused a batch it lacks)."""
    if str(batch) in step_times:
        return step_times[str(batch)], batch
    measured = max(int(b) for b in step_times)
    return step_times[str(measured)] * batch / measured, measured


def side_by_side(sample: Sample) -> str:
    """What an accelerators_fed answer is in the user's own GPUs: ` (MLPerf's) = 1.9 NVIDIA H200 (calibrated
    2026-11-28, 69 ms per 400)` beside an emulated answer, with the profile its search recorded (`recorded`; ≥ where
    the answer is a lower bound); the device of a calibrated one; '' otherwise (an answer stored before searches
    recorded their profile gets none: the newest profile now is not the one of its time)."""
    from iolab.workloads.accelerator import EMULATED, Accelerator

    spec = sample.params.get("accelerator")
    batch = sample.params.get("batch_size")
    if not isinstance(spec, dict) or not isinstance(batch, int):
        return ""
    accelerator = Accelerator.model_validate(spec)
    if accelerator.type == "calibrated":
        return f" ({accelerator.calibrated_label(batch)})"
    fields = sample.metadata.get("profile")
    if not isinstance(fields, dict):
        return ""
    step, measured = per_sample(fields["step_times"], batch)
    emulated = accelerator.compute_time(batch)
    equivalent = sample.value * step / emulated if emulated > 0 else 0.0
    when = fields["calibrated_at"][:10]
    scale = "" if fields["scale"] == "full" else f", {fields['scale']} scale"
    whose = "MLPerf's" if accelerator.type in EMULATED else "custom"
    sign = "≥" if sample.metadata.get("bound") in ("host", "ceiling") else "="
    return (
        f" ({whose}) {sign} {equivalent:.1f} {fields['device']} (calibrated {when}, "
        f"{step * 1000:.0f} ms per {batch}{'' if measured == batch else f', scaled from {measured}'}{scale})"
    )
