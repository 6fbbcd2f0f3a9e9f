"""`./lab results.reparse`: a campaign's samples made again from its runs' files, and held against its store.

Every run's samples are made from the files its hosts returned (raw/<run_id>/<host>/) and what the controller
recorded beside them, a line each time it recorded the run (raw/<run_id>/recorded.jsonl: the run, its hosts,
which failed and why, whether they ran together, how a warm run was warmed): iolab.record.derive, the code that
made them as the run ended. So a parser mended later can be applied to old campaigns, and a store can be checked
against its evidence.
Samples no run's files make (a search's answer, derived from its probes' samples) are kept as stored.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil

from iolab.campaign import Run
from iolab.errors import UserError
from iolab.record import RECORDED, derive
from iolab.samples import ResultStore, Sample


def remade(store: ResultStore) -> tuple[list[Sample], set[str]]:
    """The samples made again from the runs' files, and the runs they are of."""
    made: list[Sample] = []
    runs: set[str] = set()
    for path in sorted(store.dir.glob(f"raw/*/{RECORDED}")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                recorded = json.loads(line)
                run = Run.model_validate(recorded["run"])
            except (ValueError, KeyError, TypeError) as exc:
                why = f"{path} line {number}: not a record of a run ({exc.__class__.__name__}); it cannot be made again"
                raise UserError(why) from None
            made += derive(run, path.parent, recorded)[1]
            runs.add(run.run_id)
    return made, runs


def check(store: ResultStore, write: bool = False) -> tuple[bool, str]:
    """(whether the store holds exactly the samples made again, a line saying so); `write`: make the store so,
    the old samples kept beside it."""
    made, runs = remade(store)
    samples = store.samples()
    kept = [s for s in samples if s.run_id not in runs]
    stored = {s.to_json() for s in samples if s.run_id in runs}
    again = {s.to_json() for s in made}
    same = stored == again
    line = (
        f"campaign {store.dir.name}: {len(runs)} runs' samples made again from "
        + (
            "their files: the same as the store"
            if same
            else f"their files differ from the store: {len(stored - again)} only in the store, {len(again - stored)} "
            "only made again"
        )
        + (f"; {len(kept)} samples no run's files make (a search's answer) kept as stored" if kept else "")
    )
    if write and not same:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        aside = store.samples_path.with_name(f"samples.jsonl.{stamp}")
        shutil.move(store.samples_path, aside)
        store.add_samples([*made, *kept], "the samples made again")
        line += f"; written (the old samples kept in {aside.name})"
    return same, line
