"""The campaign's data set on each backend: the dataset phase the controller plays after mounting.

On a writable backend each host gets its own copy at
`<target>/iolab-<inventory_hostname>/dataset`, as fio gets its own work directory:
hosts may share a file system (NFS, CephFS, or simulated hosts on one disk), and two
hosts generating into one directory would race — on shared network storage that is
one copy per host. The dataset_gen role skips a host whose data set (and packed
copies) already match the campaign's, so a backend that keeps its files (local) pays
once; a tmpfs is generated again after each mount.

A read-only backend holds one copy at `<target>/dataset` that every host reads: the
rbd_snapshot role generates the campaign's data set into its image before the
snapshot; on other read-only mounts it must be there already. No dataset phase runs
for them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from iolab.campaign.model import Campaign, Run
from iolab.drive import runner
from iolab.errors import RunFailed, UserError
from iolab.shared.shapes import FORMATS

if TYPE_CHECKING:
    from iolab.drive.execute import Lab


def phase(campaign: Campaign, backend_name: str, root: str | None = None) -> runner.Phase:
    """dataset.yml with the dataset_gen role's variables for one backend (or an explicit root)."""
    spec = campaign.dataset
    assert spec is not None, "phase() needs a campaign with a dataset"
    backend = next(b for b in campaign.backends if b.name == backend_name)
    variables = {
        "dataset_gen_target": backend.target,
        "dataset_gen_files": spec.files,
        "dataset_gen_seed": spec.seed,
        "dataset_gen_classes": spec.classes,
        "dataset_gen_kind": spec.kind,
        "dataset_gen_formats": campaign.dataset_formats,
    }
    if root:
        variables["dataset_gen_root"] = root
    return runner.Phase("dataset.yml", variables)


def needed(campaign: Campaign, runs: list[Run]) -> bool:
    """Whether the dataset phase makes a data set for these runs (on a writable backend that does not stage its own)."""
    return campaign.dataset is not None and any(
        run.workload.uses_dataset and run.backend.writable and not run.backend.stages_dataset for run in runs
    )


def held(campaign: Campaign, runs: list[Run]) -> bool:
    """Whether these runs' backend holds the campaign's data set: made there (`needed`), or the one copy a read-only
    backend holds (rbd_snapshot's)."""
    return needed(campaign, runs) or (
        campaign.dataset is not None and any(not r.backend.writable and not r.backend.stages_dataset for r in runs)
    )


def gen_on_hosts(
    lab: Lab, path: str, files: int, seed: int, classes: int, formats: list[str], per_host: bool, report_dir: Path
) -> dict[str, dict]:
    """`invoke data.gen`: the data set at `path` (or path/<host>) on each host; {host: its report}."""
    if not path.startswith("/") or "{" in path or "\n" in path:
        raise UserError(f"--path {path!r}: give an absolute directory (without template markers)")
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise UserError(f"--formats: unknown format(s) {', '.join(unknown)} (choose from {', '.join(FORMATS)})")
    if files < 1 or classes < 1:
        raise UserError("--files and --classes must be at least 1")
    report_dir.mkdir(parents=True, exist_ok=True)
    variables = {
        "dataset_gen_root": path.rstrip("/") or "/",
        "dataset_gen_per_host": per_host,
        "dataset_gen_files": files,
        "dataset_gen_seed": seed,
        "dataset_gen_classes": classes,
        "dataset_gen_formats": formats,
        "dataset_gen_report_dest": str(report_dir),
    }
    result = lab.play(
        [runner.Phase("setup.yml", {"iolab_host_dl": True}), runner.Phase("dataset.yml", variables)], "data.gen"
    )
    if result.failures() or result.status != "successful":
        raise RunFailed(f"data.gen failed: {result.summary()}")
    return {host: json.loads((report_dir / f"{host}.json").read_text()) for host in lab.hosts}
