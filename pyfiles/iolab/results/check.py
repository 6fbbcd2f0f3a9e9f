"""`./lab results.index [--rebuild]`: the results index brought up to date with the files, and the proof.

For each store, its files are read afresh and set against the index's rows: the count of samples
and of run records on each side, and a checksum of each side (sha256 of the sorted row ids, each
with its sample's value or its record's status; a row id is a hash of its line, so equal sums say
the same lines are there, each once). A store whose sides differ is named, and the command fails.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from iolab.errors import RunFailed
from iolab.results import db as results_db
from iolab.results.db import RUNS, SAMPLES
from iolab.results.schema import indexed, runs, samples


@dataclasses.dataclass(frozen=True)
class Agreement:
    """One store's files against its rows in the index."""

    store: str
    file_samples: int
    db_samples: int
    file_runs: int
    db_runs: int
    file_checksum: str
    db_checksum: str

    @property
    def agree(self) -> bool:
        return (self.file_samples, self.file_runs, self.file_checksum) == (
            self.db_samples,
            self.db_runs,
            self.db_checksum,
        )


def verify(eng: Engine, results: Path) -> list[Agreement]:
    """Every store's files read afresh against the index's rows: counts and checksums."""
    out = []
    with eng.connect() as conn:
        ids = dict(conn.execute(select(indexed.c.store, indexed.c.campaign_id).distinct()).all())
        for store in results_db.stores(results):
            campaign_id = ids.get(store, "")
            file_rows = _file_ids(results / store, campaign_id)
            db_samples = conn.execute(
                select(samples.c.sample_id, samples.c.value).where(samples.c.campaign_id == campaign_id)
            ).all()
            db_runs = conn.execute(
                select(runs.c.record_id, runs.c.status).where(runs.c.campaign_id == campaign_id)
            ).all()
            out.append(
                Agreement(
                    store,
                    len(file_rows[0]),
                    len(db_samples),
                    len(file_rows[1]),
                    len(db_runs),
                    _checksum(file_rows[0], file_rows[1]),
                    _checksum([(i, float(v)) for i, v in db_samples], [(i, s) for i, s in db_runs]),
                )
            )
    return out


def _file_ids(store_dir: Path, campaign_id: str) -> tuple[list[tuple[str, float]], list[tuple[str, Any]]]:
    """(sample id, value) of each sample line and (record id, status) of each run record, read from the files."""
    found_samples: list[tuple[str, float]] = []
    found_runs: list[tuple[str, Any]] = []
    for name in (SAMPLES, RUNS):
        path = store_dir / name
        if not path.exists():
            continue
        for lines in results_db.lines_of(path, 0):
            if name == SAMPLES:
                found_samples += [(r["sample_id"], r["value"]) for r in results_db.sample_rows(campaign_id, lines, {})]
            else:
                found_runs += [(r["record_id"], r["status"]) for r in results_db.run_rows(campaign_id, lines, {})]
    return found_samples, found_runs


def _checksum(sample_rows: list[tuple[str, float]], run_rows: list[tuple[str, Any]]) -> str:
    digest = hashlib.sha256()
    for sample_id, value in sorted(sample_rows):
        digest.update(f"{sample_id} {value!r}\n".encode())
    for record_id, status in sorted(run_rows):
        digest.update(f"{record_id} {status}\n".encode())
    return digest.hexdigest()[:16]


def run(results: Path, rebuild: bool) -> tuple[list[Agreement], str]:
    """`results.index`: catch up (or rebuild), then set every store's files against its rows. Each store's
    agreement (iolab.report.database.agreement makes it a table), and the last line: what was done; RunFailed
    where a store's sides differ."""
    eng, caught = results_db.caught_up(results, rebuild)
    found = verify(eng, results)
    done = "rebuilt from the files" if rebuild else f"{caught.samples} sample(s) and {caught.runs} run record(s) added"
    if caught.reread:
        done += f"; read again (moved, replaced or deleted): {', '.join(caught.reread)}"
    differ = [a.store for a in found if not a.agree]
    if differ:
        raise RunFailed(f"the index and the files differ for {', '.join(differ)}; run `./lab results.index --rebuild`")
    return found, f"{len(found)} store(s): index and files agree; {done}"
