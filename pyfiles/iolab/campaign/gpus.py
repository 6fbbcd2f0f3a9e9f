"""Real GPUs, the seeds' method: the synthetic ceiling, then the real data per backend, 1 to 8 GPUs per host.

    {name: real, type: pytorch, reader: packed, batch_size: 256, accelerator: {type: gpu}, gpus: [1, 2, 4, 8]}

A pytorch workload with a real accelerator (`gpu`, or `cpu` where a host has none: CI)
runs two legs per GPU count (`legs`, as the campaign loads): `data: synthetic`, the
batch made on the device and trained on again and again (no loader, no storage: what
the GPUs can eat), and `data: real`, the data set through the reader. One rank per GPU,
one DDP job per host (or over every host with `distributed: true`). The answer per
backend (`answers`, shown by `./lab report`): the GPUs fed — the most GPUs per host
whose real rate held the threshold of the ceiling at that count (real / ceiling ≥ 90 %),
every fewer count tried holding too — with the images/s and GB/s that took and what
limited the first count that did not hold (iolab.measures.limits.gpu_verdict, of its slowest real run, with the
backend's fio read baseline from the same store).

`check_hosts` refuses, before any host is touched, a GPU count a host is known to lack:
its facts (results/facts/<host>.json, lab.setup and lab.facts write them) or its latest
calibration profile say how many GPUs it has. A host not known is checked by the loader
itself, which stops in one line before its first step.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from iolab.errors import UserError
from iolab.measures.samples import AGGREGATE_HOST, Sample

THRESHOLD = 0.90  # real / ceiling: a GPU count is fed when its real data keeps 90 % of what it eats
LEGS = ["synthetic", "real"]
# images/s over each run's measured window (each epoch's first step out: cuDNN's autotuning, the loader's start), the
# same for both legs; read_bw (GB/s) is what the real leg delivered over its run
RATE = "steady_samples_per_s"


def legs(data: dict[str, Any]) -> dict[str, Any]:
    """The campaign mapping with `data: [synthetic, real]` on each real-accelerator workload that names no data."""
    workloads = data.get("workloads")
    if not isinstance(workloads, list):
        return data
    out = []
    for entry in workloads:
        accelerator = entry.get("accelerator") if isinstance(entry, dict) else None
        kind = accelerator.get("type") if isinstance(accelerator, dict) else accelerator
        if (
            isinstance(entry, dict)
            and entry.get("type") == "pytorch"
            and kind in ("gpu", "cpu")
            and "data" not in entry
        ):
            entry = {**entry, "data": list(LEGS)}
        out.append(entry)
    return {**data, "workloads": out}


def known_gpus(host: str, results: Path) -> int | None:
    """How many GPUs `host` has, from its facts (lab.setup, lab.facts) or its newest calibration profile; None
    when neither says."""
    from iolab.campaign.profiles import load_profile, profiles_dir

    facts = results / "facts" / f"{host}.json"
    try:
        gpus = json.loads(facts.read_text()).get("gpus")
        if isinstance(gpus, list):
            return len(gpus)
    except (OSError, ValueError, AttributeError):
        pass
    directory = profiles_dir(results)
    newest = sorted(directory.glob(f"{host}-*.json")) if directory.is_dir() else []
    for path in reversed(newest):
        try:
            device = load_profile(path)["device"]  # bounded, a regular file, checked
        except UserError:
            continue
        if device.get("device") != "cuda":
            return 0
        if isinstance(device.get("count"), int):
            return int(device["count"])
    return None


def host_gpus(hostvars: dict[str, Any], host: str, results: Path) -> int | None:
    """known_gpus, else for this machine itself (`hostvars` say ansible_connection: local) the GPUs its NVIDIA
    driver lists (/proc/driver/nvidia/gpus): 0 where it lists none and no AMD GPU (/dev/kfd) is there; None
    when nothing says."""
    known = known_gpus(host, results)
    if known is not None or hostvars.get("ansible_connection") != "local":
        return known
    nvidia = Path("/proc/driver/nvidia/gpus")
    if nvidia.is_dir():
        return len(list(nvidia.iterdir()))
    return None if Path("/dev/kfd").exists() else 0


def check_hosts(spec: Any, hosts: list[str], results: Path) -> None:
    """UserError (one line) when a workload asks for more GPUs per host than a selected host is known to have."""
    for workload in spec.workloads:
        accelerator = getattr(workload, "accelerator", None)
        if getattr(accelerator, "type", None) != "gpu":  # (a checkpoint workload's accelerator is a name)
            continue
        wanted = workload.gpus or 1
        for host in hosts:
            has = known_gpus(host, results)
            if has is not None and has < wanted:
                raise UserError(
                    f"workload {workload.name} asks for {wanted} GPU(s) per host; {host} has {has} (its facts or "
                    f"calibration profile under {results}): lower gpus, or leave {host} out with --hosts"
                )


def _rate(samples: list[Sample], run_ids: set[str], metric: str) -> float | None:
    """The median over the runs of `metric` for all hosts (host "*", or the one host's)."""
    values = [s.value for s in samples if s.run_id in run_ids and s.host == AGGREGATE_HOST and s.metric == metric]
    if not values:  # one host: no aggregate is made
        values = [s.value for s in samples if s.run_id in run_ids and s.metric == metric]
    return statistics.median(values) if values else None


def answers(samples: list[Sample], threshold: float = THRESHOLD) -> list[dict[str, Any]]:
    """Per (workload, backend) with a real accelerator: each GPU count's ceiling and real rates (medians over the
    repetitions, all hosts), their ratio, and the GPUs fed (see the module)."""
    from iolab.measures import limits

    runs: dict[tuple[str, str], dict[int, dict[str, set[str]]]] = {}
    for s in samples:
        gpus, leg = s.params.get("gpus"), s.params.get("data")
        if gpus is None or leg not in LEGS or s.metric != RATE:
            continue
        points = runs.setdefault((s.workload, s.backend), {})
        points.setdefault(int(gpus), {"synthetic": set(), "real": set()})[leg].add(s.run_id)
    out = []
    for (workload, backend), points in sorted(runs.items()):
        rows, fed, stopped = [], 0, None
        for count in sorted(points):
            ceiling = _rate(samples, points[count]["synthetic"], RATE)
            real = _rate(samples, points[count]["real"], RATE)
            ratio = real / ceiling if real is not None and ceiling else None
            row: dict[str, Any] = {
                "gpus": count,
                "ceiling": ceiling,
                "real": real,
                "ratio": ratio,
                "read_bw": _rate(samples, points[count]["real"], "read_bw"),
                "verdict": None,
            }
            # The verdict of one run (its evidence is one run's): the slowest real repetition at this count.
            rates = {run_id: _rate(samples, {run_id}, RATE) or 0.0 for run_id in points[count]["real"]}
            if rates:
                slowest = min(rates, key=lambda run_id: rates[run_id])
                mine = [s for s in samples if s.run_id == slowest]
                row["verdict"] = limits.gpu_verdict(mine, ceiling, baseline=samples)
            rows.append(row)
            if stopped is None and ratio is not None and ratio >= threshold:
                fed = count
            elif stopped is None and ratio is not None:
                stopped = row
        out.append({"workload": workload, "backend": backend, "fed": fed, "points": rows, "stopped": stopped})
    return out


def lines(samples: list[Sample]) -> list[str]:
    """The report's lines: per backend, the GPUs fed with their rates, then each count's figures and verdict."""
    out = []
    for answer in answers(samples):
        at = next((p for p in answer["points"] if p["gpus"] == answer["fed"]), None)
        took = (
            f" at {at['real']:,.0f} images/s, {(at['read_bw'] or 0.0) / 1e9:.2f} GB/s"
            if at and at["real"] is not None
            else ""
        )
        stop = answer["stopped"]
        why = f"; {stop['gpus']} GPU(s) not fed: {stop['verdict']['reason']}" if stop and stop["verdict"] else ""
        out.append(
            f"{answer['backend']} ({answer['workload']}): {answer['fed']} GPU(s) per host fed "
            f"(real ≥ {THRESHOLD:.0%} of the synthetic ceiling){took}{why}"
        )
        for p in answer["points"]:
            ratio = f"{p['ratio']:.0%}" if p["ratio"] is not None else "—"
            ceiling = f"{p['ceiling']:,.0f}" if p["ceiling"] is not None else "—"
            real = f"{p['real']:,.0f}" if p["real"] is not None else "—"
            verdict = f" — {p['verdict']['side']}-bound" if p["verdict"] else ""
            out.append(f"  {p['gpus']} GPU(s): ceiling {ceiling} images/s, real {real} images/s ({ratio}){verdict}")
    return out
