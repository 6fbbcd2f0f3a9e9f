"""bench.calibrate: each model's real training step on each host, stored as samples and written as profiles.

    ./lab bench.calibrate --hosts gpu01 [--models resnet50,retinanet,unet3d] [--batch-sizes 400,256]

A campaign (`calibration`) of `type: calibrate` workloads, one per model and batch, on a
`local` backend that is never read (the batch is made on the device): each host times the
model's real training step (iolab.kinds.calibrate.host) and its samples (`step_time`,
`step_time_spread`, `samples_per_s`) are stored as any run's are; each call is one new
repetition. Then each host's figures of that call are written as one profile
(iolab.campaign.profiles), which a campaign names as `accelerator: {type: calibrated}`. With no
--scale (auto), a host known to have no GPU is refused before anything runs, naming --scale
tiny: on a CPU the full-size models take hours (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from iolab.campaign import profiles
from iolab.campaign.profiles import CAMPAIGN, PROFILE_KIND, device_label, load_profile, profiles_dir
from iolab.errors import UserError
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample

MODELS = ("resnet50", "retinanet", "unet3d")


def batches_for(models: list[str], sizes: list[int] | None, spec: Any = None) -> list[tuple[str, int]]:
    """(model, batch) pairs to calibrate: `sizes` for every model; else the batch sizes of the campaign `spec`'s
    pytorch workloads whose accelerator names the model; else MLPerf Storage's batch of the model."""
    from iolab.workloads.accelerator import REFERENCE_BATCHES

    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        raise UserError(f"--models {','.join(models)}: choose among {', '.join(MODELS)}")
    out: list[tuple[str, int]] = []
    for model in models:
        wanted = list(sizes or [])
        if not wanted and spec is not None:
            wanted = sorted(
                {
                    w.batch_size
                    for w in spec.workloads
                    if getattr(w, "accelerator", None) is not None and w.accelerator.model == model
                }
            )
        out += [(model, size) for size in wanted or [REFERENCE_BATCHES[model]]]
    return out


def campaign(pairs: list[tuple[str, int]], scale: str, steps: int, blocks: int, warmup: int, compile: str) -> Any:
    """The calibration campaign: one calibrate workload per (model, batch), on a backend it never reads."""
    from iolab.campaign.model import parse

    workloads = [
        {
            "name": f"{model}-b{batch}",
            "type": "calibrate",
            "model": model,
            "batch_size": batch,
            "scale": scale,
            "steps": steps,
            "blocks": blocks,
            "warmup_steps": warmup,
            "compile": compile,
            "cache": "keep",
        }
        for model, batch in pairs
    ]
    raw = {
        "name": CAMPAIGN,
        "repetitions": 1,
        "backends": [{"name": "device", "type": "local", "path": "/var/tmp"}],
        "workloads": workloads,
    }
    return parse(raw, "bench.calibrate flags", Path.cwd())


def write_profiles(store: ResultStore, repetition: int, results: Path) -> list[Path]:
    """One profile per host from the calibrate samples of `repetition` in the store; their paths."""
    by_host: dict[str, list[Sample]] = {}
    for s in store.samples():
        if s.repetition == repetition and s.metric == "step_time" and s.host != AGGREGATE_HOST:
            by_host.setdefault(s.host, []).append(s)
    written = []
    for host, samples in sorted(by_host.items()):
        documents = [s.metadata["calibration"] for s in samples]
        entries = [
            {k: v for k, v in entry.items() if k not in ("block_s", "modes")} | {"run_id": s.run_id}
            for s, document in zip(samples, documents, strict=True)
            for entry in document["entries"]
        ]
        latest = max(d["measured_at"] for d in documents)
        profile = {
            "kind": PROFILE_KIND,
            "host": host,
            "measured_at": latest,
            "device": documents[0]["device"],
            "campaign": store.dir.name,
            "repetition": repetition,
            "entries": sorted(entries, key=lambda e: (e["model"], e["batch"])),
        }
        directory = profiles_dir(results)
        directory.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = directory / f"{host}-{stamp}.json"
        path.write_text(json.dumps(profile, indent=1) + "\n")
        written.append(path)
    return written


def read_campaign(path: Path) -> Any:
    """The campaign `path` as bench.calibrate reads it, for its batch sizes: its calibrated accelerators stand as
    custom ones of their model (campaign.profiles.standing_in), since the profile they name may be the one this call
    makes."""
    from iolab import yamlfile
    from iolab.campaign.model import parse

    raw = yamlfile.load(path, "campaign file", "--campaign")
    return parse(profiles.standing_in(raw) if isinstance(raw, dict) else raw, str(path), path.parent)


def _scale(lab: Any, results: Path) -> str:
    """--scale auto: full; UserError (one line) where a selected host is known to have no GPU (campaign.gpus.host_gpus:
    its facts, its last profile, or this machine's own driver)."""
    from iolab.campaign.gpus import host_gpus

    cpus = [h for h in lab.hosts if host_gpus(lab.inventory.hostvars.get(h, {}), h, results) == 0]
    if cpus:
        raise UserError(
            f"{', '.join(cpus)} {'has' if len(cpus) == 1 else 'have'} no GPU, and the full-size models take hours "
            "on a CPU: pass "
            "--scale tiny --batch-sizes 2 to try the code path (a CPU's figure is no GPU's), --scale full to time "
            "the real models anyway, or leave it out with --hosts"
        )
    return "full"


# bench.calibrate's flags (tasks/bench.py): what each says
FLAGS = {
    "models": "models to calibrate: resnet50,retinanet,unet3d (default all three)",
    "batch_sizes": "batch sizes, e.g. 400,256 (default: the campaign's workloads' for each model, else MLPerf's)",
    "campaign": "a campaign whose pytorch workloads' batch sizes to calibrate (its profile: latest may not exist yet)",
    "scale": "auto (the default: full, refused in one line where a host is known to have no GPU: the full-size "
    "models take hours on a CPU) | full (the real models: 5 warm-up steps, 5 timed blocks of 10) | tiny (every "
    "width / 8, 1 warm-up step, 2 blocks of 2: a CPU's code path, CI)",
}
# Steps per scale: (warm-up, steps per block, blocks); torch.compile on CUDA: both measured, the faster kept
TIMING = {"full": (5, 10, 5), "tiny": (1, 2, 2)}


def run(
    lab: Any, models: str, batch_sizes: str, campaign_file: str | None, scale: str, steal: bool = False
) -> list[str]:
    """bench.calibrate: one new repetition of the calibration campaign on the lab's hosts (leased), then a profile
    per host; the lines that say what was measured and where the profiles are."""
    from iolab import paths
    from iolab.drive import lease
    from iolab.run import bench

    spec = read_campaign(Path(campaign_file)) if campaign_file else None
    try:
        sizes = [int(b) for b in batch_sizes.split(",") if b.strip()]
    except ValueError:
        raise UserError(
            f"--batch-sizes {batch_sizes!r}: give whole numbers separated by commas, e.g. 400,256"
        ) from None
    if scale not in (*TIMING, "auto"):
        raise UserError(f"--scale {scale!r}: choose auto, full or tiny")
    results = paths.results_root()
    scale = _scale(lab, results) if scale == "auto" else scale
    warmup, steps, blocks = TIMING[scale]
    pairs = batches_for([m for m in (models or ",".join(MODELS)).split(",") if m], sizes or None, spec)
    one = campaign(pairs, scale, steps, blocks, warmup, "auto")
    store = ResultStore(results, CAMPAIGN)
    with lease.held(lab, "bench.calibrate", steal):
        one = bench.next_repetition(one, store)
        bench.outcome(bench.run_campaign(one, lab, store, only_repetition=one.repetitions), store)
    written = write_profiles(store, one.repetitions, results)
    lines = []
    for path in written:
        profile = load_profile(path)
        device = profile["device"]
        what = (
            f"{device.get('count')} × {device_label(profile)}"
            if device.get("device") == "cuda"
            else device_label(profile)
        )
        lines.append(f"{profile['host']}: {what}, torch {device.get('torch')}, driver {device.get('driver') or '—'}")
        for e in profile["entries"]:
            lines.append(
                f"  {e['model']} at batch {e['batch']} ({e['scale']}): {e['step_s'] * 1000:.1f} ms per step "
                f"({e['step_s_min'] * 1000:.1f}–{e['step_s_max'] * 1000:.1f}, spread {e['spread_pct']:.1f} %), "
                f"{e['samples_per_s']:,.0f} samples/s{', compiled' if e['compile'] else ''}"
            )
        lines.append(f"  profile: {path}")
    lines.append(
        "name one in a campaign: accelerator: {type: calibrated, profile: FILE|latest, model: MODEL}; "
        f"samples in {store.dir}"
    )
    return lines
