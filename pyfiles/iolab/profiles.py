"""Accelerator profiles: the files bench.calibrate writes (iolab.calibration), as campaigns and reports read them.

    results/calibration/profiles/<host>-<UTC time>.json      one per host and call of bench.calibrate
    accelerator: {type: calibrated, profile: FILE|latest, model: resnet50}      (a pytorch workload)

A profile holds the device (GPU model and count, driver, torch and CUDA versions, or the
CPU's model and cores) and per model and batch the seconds per step with their spread
and the samples/s. A campaign's `accelerator: {type: calibrated}` is resolved when the
campaign loads (`resolve`, before any host is touched): the profile named (a path,
relative to the campaign file, or `latest`: the newest profile that has the model) is
read and its step times per batch are written into the accelerator, so the run's id
changes with the profile and the loader sleeps the calibrated step per batch (an
emulated accelerator of that device). Refused in one line: a profile that is missing or
not one, a profile without the model, and (iolab.workloads.accelerator) a batch it has
no figure for. `side_by_side` gives a search's answer in a profile's device beside
MLPerf's emulated one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iolab.errors import UserError
from iolab.samples import Sample

CAMPAIGN = "calibration"  # bench.calibrate's campaign: its profiles live under results/<CAMPAIGN>/profiles
PROFILE_KIND = "iolab.profile/1"


def profiles_dir(results: Path) -> Path:
    return results / CAMPAIGN / "profiles"


def load_profile(path: Path, where: str = "accelerator.profile") -> dict[str, Any]:
    """A profile file, or UserError in one line (missing, not JSON, not a profile)."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(
            f"{where} {path}: no such profile; run ./lab bench.calibrate --hosts HOST first, or name a file "
            f"under {profiles_dir(_results())}"
        ) from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{where} {path}: not a readable profile ({exc})") from None
    if not isinstance(document, dict) or document.get("kind") != PROFILE_KIND or not document.get("entries"):
        raise UserError(
            f"{where} {path}: not an accelerator profile (kind {PROFILE_KIND!r}, written by bench.calibrate)"
        )
    return document


def _results() -> Path:
    from iolab import paths

    return paths.results_root()


def latest(model: str, results: Path | None = None) -> Path | None:
    """The newest profile (by when it was measured, then its name) that has `model`; None when there is none."""
    found = []
    directory = profiles_dir(results or _results())
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(document, dict) and any(e.get("model") == model for e in document.get("entries", [])):
            found.append((str(document.get("measured_at", "")), path.name, path))
    return max(found)[2] if found else None


def device_label(profile: dict[str, Any]) -> str:
    """The device a profile emulates, as the report names it: the GPU's model, or the CPU's."""
    device = profile["device"]
    return str(device.get("name") or device.get("device") or "unknown device")


def accelerator_fields(profile_path: Path, model: str) -> dict[str, Any]:
    """What a calibrated accelerator carries from its profile (UserError when the profile lacks the model)."""
    profile = load_profile(profile_path)
    entries = [e for e in profile["entries"] if e["model"] == model]
    if not entries:
        has = ", ".join(sorted({f"{e['model']} (batch {e['batch']})" for e in profile["entries"]}))
        raise UserError(
            f"accelerator.profile {profile_path} holds {has}, not {model}: calibrate it "
            f"(./lab bench.calibrate --models {model}) or name another profile"
        )
    return {
        "profile": str(profile_path),
        "device": device_label(profile),
        "calibrated_at": profile["measured_at"],
        "scale": entries[0].get("scale", "full"),
        "step_times": {str(e["batch"]): e["step_s"] for e in entries},
    }


def resolve(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """The campaign mapping with each `accelerator: {type: calibrated}` filled in from its profile (see the
    module); UserError in one line naming the workload when the profile is missing or lacks the model."""
    workloads = data.get("workloads")
    if not isinstance(workloads, list):
        return data
    out = []
    for index, entry in enumerate(workloads):
        accelerator = entry.get("accelerator") if isinstance(entry, dict) else None
        if not isinstance(accelerator, dict) or accelerator.get("type") != "calibrated":
            out.append(entry)
            continue
        model = str(accelerator.get("model", "resnet50"))
        named = str(accelerator.get("profile", "latest"))
        if named == "latest":
            path = latest(model)
            if path is None:
                raise UserError(
                    f"workloads[{index}].accelerator.profile latest: no profile of {model} under "
                    f"{profiles_dir(_results())}; run ./lab bench.calibrate --hosts HOST --models {model} first"
                )
        else:
            path = Path(named) if Path(named).is_absolute() else (base_dir / named).resolve()
        try:
            fields = accelerator_fields(path, model)
        except UserError as exc:
            raise UserError(f"workloads[{index}].{exc}") from None
        out.append({**entry, "accelerator": {**accelerator, "model": model, **fields}})
    return {**data, "workloads": out}


def per_sample(step_times: dict[str, float], batch: int) -> tuple[float, int]:
    """(seconds per step at `batch`, the batch it was measured at): that batch's figure, else the largest batch's
    scaled per sample (for the report's side by side only: a campaign is refused a batch it lacks)."""
    if str(batch) in step_times:
        return step_times[str(batch)], batch
    measured = max(int(b) for b in step_times)
    return step_times[str(measured)] * batch / measured, measured


def side_by_side(sample: Sample, results: Path | None = None) -> str:
    """What an accelerators_fed answer is in the user's own GPUs: ` = 1.9 NVIDIA H200 (calibrated 2026-11-28,
    69 ms per 400)` beside an emulated answer where a profile of its model exists; the device of a calibrated one;
    '' otherwise."""
    from iolab.workloads.accelerator import EMULATED, REAL, Accelerator

    spec = sample.params.get("accelerator")
    batch = sample.params.get("batch_size")
    if not isinstance(spec, dict) or not isinstance(batch, int):
        return ""
    accelerator = Accelerator.model_validate(spec)
    if accelerator.type == "calibrated":
        return f" ({accelerator.calibrated_label(batch)})"
    if accelerator.type in REAL:
        return ""
    path = latest(accelerator.model, results)
    if path is None:
        return ""
    try:
        fields = accelerator_fields(path, accelerator.model)
    except UserError:
        return ""
    step, measured = per_sample(fields["step_times"], batch)
    emulated = accelerator.compute_time(batch)
    equivalent = sample.value * step / emulated if emulated > 0 else 0.0
    when = fields["calibrated_at"][:10]
    scale = "" if fields["scale"] == "full" else f", {fields['scale']} scale"
    whose = "MLPerf's" if accelerator.type in EMULATED else "custom"
    return (
        f" ({whose}) = {equivalent:.1f} {fields['device']} (calibrated {when}, "
        f"{step * 1000:.0f} ms per {batch}{'' if measured == batch else f', scaled from {measured}'}{scale})"
    )
