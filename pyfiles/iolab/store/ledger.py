"""A campaign's ledger: results/<store>/campaign.json, what the store is a campaign of.

    {"schema": "iolab.campaign/1", "id": "…32 hex…", "name": "quick", "file_hash": "…",
     "started": "2026-11-21T06:13:27.123456Z", "controller": "ctl01", "iolab_version": "0.1.0",
     "dataset": "…" | null, "results_db": "postgresql://lab-db/iolab" | null,
     "plan": [{"run_id", "backend", "workload", "repetition", "hosts": [...], "config_hash"}, ...],
     "held_by": {iolab.drive.lease.record(): user, controller, pid, pid_start, boot_id, since}}

`begin` writes it as a campaign starts (bench.run_campaign), each call again with the plan of
that call, keeping the first call's `id` and `started`. The id names the campaign in the results
database (iolab.results.db), so a store moved aside by --no-resume (`results/<name>.<UTC time>/`)
is the same campaign under another directory. A store from before the ledger gets one the first
time it is indexed, its id a hash of its first line, `adopt`. `held_by` says which command ran
it last: while that command lives (iolab.drive.lease.gone), the campaign is running (iolab.report.status).

A campaign file edited between calls (`check`, before the ledger is written again): runs stored by an earlier
call that the campaign no longer has (a workload or backend changed or removed: their run ids, hashes of
everything that decides a run, are not the campaign's any more) are refused in one line naming them, with
--no-resume as the fix; a resume never puts results of two configurations in one store under one id (reports,
the index and `status` read a store as one campaign). Runs added (another backend, more repetitions) go on as a
resume; a changed run with nothing stored yet is said in a line, and runs as the file says. bench.fio's and
bench.calibrate's stores gather one-off runs of whatever flags each call gives: they are not checked.

`config_hash` is a run's workload point without the campaign, the backend or the repetition:
two campaigns with the same config hashes ran the same workloads (iolab.report.status's comparability).
The file is replaced whole (written aside, fsynced, renamed), never torn.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import iolab
from iolab.errors import UserError
from iolab.measures.samples import utc_iso

if TYPE_CHECKING:
    from iolab.campaign.model import Campaign, Run
    from iolab.measures.samples import ResultStore

FILE = "campaign.json"
SCHEMA = "iolab.campaign/1"


def read(store_dir: Path) -> dict[str, Any] | None:
    """The store's ledger, or None (none yet, or not one iolab wrote)."""
    try:
        found = json.loads((store_dir / FILE).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("schema") == SCHEMA and found.get("id") else None


def _write(store_dir: Path, ledger: dict[str, Any]) -> None:
    tmp = store_dir / f".{FILE}.{os.getpid()}"
    with tmp.open("w") as handle:
        json.dump(ledger, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(store_dir / FILE)


def config_hash(run: Run) -> str:
    """The run's workload point (its workload's configuration, host count and cache pass): 12 hex digits."""
    point = {
        "workload": run.workload.model_dump(mode="json", exclude_defaults=True),
        "hosts": run.hosts,
        "cache_pass": run.cache_pass,
    }
    return hashlib.sha256(json.dumps(point, sort_keys=True).encode()).hexdigest()[:12]


def dataset_hash(campaign: Campaign) -> str | None:
    if campaign.dataset is None:
        return None
    identity = json.dumps(campaign.dataset.identity(), sort_keys=True, default=str)
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


def _file_hash(campaign: Campaign) -> str:
    return hashlib.sha256(campaign.model_dump_json().encode()).hexdigest()


def check(store: ResultStore, campaign: Campaign, runs: list[Run], done: set[tuple[str, str]]) -> str | None:
    """Before a resume writes the ledger again: UserError when the store holds runs (`done`: (run id, host) of those
    it holds) of the earlier plan that the campaign (its `runs`, this call's plan) no longer has (see the module's
    docstring); a line to say when runs of that plan not stored yet changed; None when nothing of it changed."""
    earlier = read(store.dir) or {}
    plan = [p for p in earlier.get("plan") or [] if isinstance(p, dict)]
    if not plan or earlier.get("file_hash") == _file_hash(campaign):
        return None
    now = {r.run_id for r in runs}
    stored = {run_id for run_id, _ in done}
    gone = [p for p in plan if p.get("run_id") not in now]
    if not gone:
        return None
    kept = [p for p in gone if p.get("run_id") in stored]
    named = "; ".join(f"{p.get('workload')} on {p.get('backend')}, rep {p.get('repetition')}" for p in kept[:3])
    if kept:
        raise UserError(
            f"campaign {campaign.name}: its file changed since {store.dir} was begun ({earlier.get('started')}): "
            f"{len(kept)} stored run(s) are no longer in it ({named}{' …' if len(kept) > 3 else ''}); run with "
            "--no-resume to start over (the stored results are moved aside, kept), or put the file back"
        )
    return (
        f"campaign {campaign.name}: its file changed since the last call: {len(gone)} run(s) of the earlier plan, "
        "none stored, are no longer in it; the runs are the file's as it is now"
    )


def begin(
    store: ResultStore, campaign: Campaign, runs: list[Run], hosts: list[str], held_by: dict[str, Any]
) -> dict[str, Any]:
    """Write the store's ledger as a campaign (or a later call of it) starts; return it. `held_by`: who holds
    the hosts (iolab.drive.lease.record), as the ledger says it."""
    earlier = read(store.dir) or {}
    started = earlier.get("started") or utc_iso(time.time())
    ledger = {
        "schema": SCHEMA,
        "id": earlier.get("id") or _new_id(campaign.name, started),
        "name": campaign.name,
        "file_hash": _file_hash(campaign),
        "started": started,
        "controller": socket.gethostname(),
        "iolab_version": iolab.__version__,
        "dataset": dataset_hash(campaign),
        "results_db": campaign.results_db,
        "plan": [
            {
                "run_id": r.run_id,
                "backend": r.backend.name,
                "workload": r.workload.name,
                "repetition": r.repetition,
                "hosts": r.on(hosts),
                "config_hash": config_hash(r),
            }
            for r in runs
        ],
        "held_by": held_by,
    }
    store.dir.mkdir(parents=True, exist_ok=True)
    _write(store.dir, ledger)
    return ledger


def _new_id(name: str, started: str) -> str:
    seed = f"{name}\n{started}\n{socket.gethostname()}\n{os.getpid()}\n{os.urandom(8).hex()}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


def adopt(store_dir: Path, first_line: bytes, name: str) -> dict[str, Any]:
    """A ledger for a store from before ledgers (its id a hash of its first line), written when the store is
    writable; the same one every time for the same store."""
    ledger = {
        "schema": SCHEMA,
        "id": hashlib.sha256(b"adopted\n" + first_line).hexdigest()[:32],
        "name": name,
        "plan": [],
    }
    try:
        _write(store_dir, ledger)
    except OSError:
        pass  # a read-only store: the same id is derived again next time
    return ledger
