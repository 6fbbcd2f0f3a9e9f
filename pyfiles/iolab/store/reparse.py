"""`./lab results.reparse`: a campaign's samples made again from its runs' files, and held against its store.

Every run's samples are made from the files its hosts returned (raw/<run_id>/<host>/) and what the controller
recorded beside them, a line each time it recorded the run (raw/<run_id>/recorded.jsonl: the run, its hosts,
which failed and why, whether they ran together, how a warm run was warmed): iolab.store.record.derive, the code that
made them as the run ended. So a parser mended later can be applied to old campaigns, and a store can be checked
against its evidence.
Samples no run's files make (a search's answer, derived from its probes' samples) are kept as stored.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

from iolab.campaign.model import Run
from iolab.errors import UserError
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample
from iolab.parsers.faults import FAULTS_FILE
from iolab.store.record import RECORDED, derive
from iolab.units import counted

Why = dict[tuple[str, str], str]  # (run_id, host) → why its files made no samples (the parser's words)


def remade(store: ResultStore) -> tuple[list[Sample], set[str], Why]:
    """The samples made again from the runs' files, the runs they are of, and each host's reasons why its files made
    none (an unreadable raw file, named by the parser; a host that failed as it ran, too)."""
    made: list[Sample] = []
    runs: set[str] = set()
    why: Why = {}
    for path in sorted(store.dir.glob(f"raw/*/{RECORDED}")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                recorded = json.loads(line)
                run = Run.model_validate(recorded["run"])
            except (ValueError, KeyError, TypeError) as exc:
                said = (
                    f"{path} line {number}: not a record of a run ({exc.__class__.__name__}); it cannot be made again"
                )
                raise UserError(said) from None
            _, samples, errors = derive(run, path.parent, recorded)
            made += samples
            runs.add(run.run_id)
            why.update({(run.run_id, host): error for host, error in errors.items() if error})
    return made, runs, why


def unmade(stored: list[Sample], made: list[Sample], why: Why, raw: Path) -> dict[str, str]:
    """The runs whose files no longer make samples the store holds ({run_id: why}): a host with stored samples and
    none made again (its raw files unreadable: the parser's words name the file), a faulted run's figures without
    the faults' record."""
    have = {(s.run_id, s.host) for s in made}
    faulted = {s.run_id for s in made if "faults" in s.metadata}
    out: dict[str, str] = {}
    for s in stored:
        if (s.run_id, s.host) not in have and s.host != AGGREGATE_HOST:
            out.setdefault(s.run_id, why.get((s.run_id, s.host)) or f"{raw / s.run_id / s.host}: its files make none")
        elif "faults" in s.metadata and s.run_id not in faulted:
            out.setdefault(s.run_id, f"{raw / s.run_id / FAULTS_FILE}: no record of the faults (missing or cut)")
    return out


def check(store: ResultStore, write: bool = False) -> tuple[bool, str]:
    """(whether the store holds exactly the samples made again, a line saying so); `write`: make the store so, the
    old samples kept beside it. A run whose files no longer make samples the store holds (an unreadable raw file)
    keeps its stored samples, and the line names the file."""
    made, runs, why = remade(store)
    samples = store.samples()
    kept = [s for s in samples if s.run_id not in runs]
    lost = unmade([s for s in samples if s.run_id in runs], made, why, store.dir / "raw")
    stored = {s.to_json() for s in samples if s.run_id in runs}
    again = {s.to_json() for s in made}
    same = stored == again
    line = (
        f"campaign {store.dir.name}: the samples of {counted(len(runs), 'run')} made again from "
        + (
            "their files: the same as the store"
            if same
            else f"their files differ from the store: {len(stored - again)} only in the store, {len(again - stored)} "
            "only made again"
        )
        + (f"; {len(kept)} samples no run's files make (a search's answer) kept as stored" if kept else "")
        + "".join(f"; run {run} cannot be made again ({said})" for run, said in sorted(lost.items()))
    )
    written = [
        *(s for s in made if s.run_id not in lost),
        *(s for s in samples if s.run_id in lost),
        *kept,
    ]
    if write and {s.to_json() for s in written} != {s.to_json() for s in samples}:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        aside = store.samples_path.with_name(f"samples.jsonl.{stamp}")
        shutil.move(store.samples_path, aside)
        store.add_samples(written, "the samples made again")
        line += f"; written (the old samples kept in {aside.name})"
    if write and lost:
        line += f"; {sum(s.run_id in lost for s in samples)} stored samples of {len(lost)} run(s) kept as they were"
    return same, line
