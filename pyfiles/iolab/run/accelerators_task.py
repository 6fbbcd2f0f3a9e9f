"""The command bench.accelerators (tasks/bench.py): the search (iolab.run.accelerators) on one backend of a campaign,
outside its loop: the probes are a campaign of their own, `accelerators-<backend>-<type>`, run in one backend
session (provision, mount, data set once; unmount), and the answer is said in one line.

    run_search(spec, lab, results, backend, accelerator, workload, ceiling) → the answer's summary
    answer(summary, kind, backend, hosts)                                   → its last line
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from iolab.campaign.model import Campaign, Run, expand, parse, repetition
from iolab.drive.execute import Lab
from iolab.errors import UserError
from iolab.kinds.pytorch.workload import PytorchWorkload, probe_epochs, step_floor
from iolab.measures import limits
from iolab.progress import Progress
from iolab.report.tables import fed_label
from iolab.results import store as results_store
from iolab.run.accelerators import probe_until, summary
from iolab.run.session import BackendSession, CampaignState
from iolab.workloads.mlperf import AU_THRESHOLD


def probe_campaign(
    spec: Campaign, backend: str, accelerator: dict[str, Any], workload: dict[str, Any], counts: list[int]
) -> Campaign:
    """A campaign of one pytorch workload swept over `counts` accelerators, on one backend of `spec`."""
    if spec.dataset is None:
        raise UserError(
            f"campaign {spec.name} has no dataset: bench.accelerators reads the campaign's data set; "
            "add dataset: {kind: imagenet-like, files: N, seed: S}"
        )
    chosen = next((b for b in spec.backends if b.name == backend), None)
    if chosen is None:
        raise UserError(
            f"backend {backend!r} is not in campaign {spec.name} (it has: "
            f"{', '.join(b.name for b in spec.backends)}); pass --backend NAME"
        )
    raw = {
        "name": f"accelerators-{backend}-{accelerator['type']}",
        "backends": [chosen.model_dump(exclude_none=True)],
        "dataset": spec.dataset.model_dump(),
        "workloads": [
            {"name": "probe", "type": "pytorch", **workload, "accelerator": accelerator, "accelerators": counts}
        ],
    }
    return parse(raw, "bench.accelerators flags", Path.cwd())


def run_search(
    spec: Campaign,
    lab: Lab,
    results: Path,
    backend: str,
    accelerator: dict[str, Any],
    workload: dict[str, Any],
    ceiling: int,
    threshold: float = AU_THRESHOLD,
    show: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Provision the hosts, mount the backend and make the data set (one playbook), probe N accelerators per
    host as `search` asks, unmount: a backend session (iolab.run.session) of the probes' campaign. Returns the
    answer's `summary`."""
    first = probe_campaign(spec, backend, accelerator, workload, [1])
    state = CampaignState(first, lab, results_store.open_store(results, first.name), Progress([], lab.console))
    hosts = list(lab.hosts)
    floor = step_floor()
    template = expand(first)[0].workload
    assert isinstance(template, PytorchWorkload) and first.dataset  # probe_campaign made both
    files = first.dataset.files
    probe_epochs(template, files, ceiling, len(hosts), floor)  # refused before anything runs

    def run_of(n: int, repeat: int) -> Run:
        counted = {**workload, "epochs": probe_epochs(template, files, n, len(hosts), floor)}
        point = expand(probe_campaign(spec, backend, accelerator, counted, [n]))[0]
        return repetition(first, point.backend, point.workload, repeat)[0]

    with BackendSession(state, backend, hosts, expand(first)) as session:
        session.flush()
        session.standing.require(hosts)
        outcome, probes = probe_until(session, run_of, hosts, ceiling, threshold, show, floor)
    return summary(outcome, probes, threshold, ceiling, floor)


def answer(meta: dict[str, Any], kind: str, backend: str, hosts: int) -> str:
    """bench.accelerators' last line: the answer (`summary`) with its interval, the AU and throughput at it,
    what limited it, then its flags."""
    at, limit = meta["at"], meta["limited_by"]
    flags = "".join(f"; ⚑ {flag}" for flag in meta["flags"])
    if meta["held"] == 0:
        return (
            f"answer: none — even 1 {kind} accelerator per host falls below {meta['threshold']:g} % AU on {backend}; "
            f"{limits.said(limit)}{flags}"
        )
    return (
        f"answer: {fed_label(meta['held'], {**meta, 'flags': []}, kind)} accelerator(s) per host on {backend} "
        f"(AU {at['au']:.1f} %, {at['samples_per_s']:.0f} samples/s, {at['read_bw'] / 2**20:.0f} MiB/s over "
        f"{hosts} host(s)); {limits.said(limit)}{flags}"
    )
