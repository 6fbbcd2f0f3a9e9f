"""The sample contract and the results store of a campaign.

A sample is one measured value with everything needed to compare it later
(docs/DESIGN.md, "Contracts"). The store is append-only JSON lines:

    results/<campaign>/samples.jsonl   one sample a line
    results/<campaign>/runs.jsonl      one status record per run and host (ok / failed + error)
    results/<campaign>/raw/<run_id>/<host>/   the tools' own files

Appends are a single write of whole lines; a line torn by a crash is ignored on
read and cut off before the next append, so the files never hold half a line.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

SCHEMA = "iolab.sample/1"
UNITS = frozenset({"B/s", "B", "IOPS", "s", "samples/s", "%", "ns", "cores", "count", "ops/s"})
AGGREGATE_HOST = "*"


def utc_iso(epoch: float) -> str:
    """'2026-11-21T06:13:27.123456Z' from seconds since the epoch."""
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclasses.dataclass(frozen=True)
class Sample:
    campaign: str
    run_id: str
    repetition: int
    host: str
    backend: str
    workload: str
    metric: str
    value: float
    unit: str
    started_at: str
    ended_at: str
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    schema: str = SCHEMA

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"sample {self.metric}: unit {self.unit!r} is not one of {sorted(UNITS)}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sample:
        return cls(**data)


def _append_lines(path: Path, records: Iterable[str]) -> None:
    payload = "".join(line + "\n" for line in records).encode()
    if not payload:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size:
            # Cut a line torn by an earlier crash so the new lines start clean.
            tail = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
            if not tail.endswith(b"\n"):
                os.ftruncate(fd, size - (len(tail) - tail.rfind(b"\n") - 1))
        os.write(fd, payload)
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_lines(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with path.open("rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                return  # torn by a crash: never half a record
            yield json.loads(raw)


class ResultStore:
    """The results of one campaign under `root/<campaign>/`."""

    def __init__(self, root: Path, campaign: str):
        self.dir = Path(root) / campaign
        self.samples_path = self.dir / "samples.jsonl"
        self.runs_path = self.dir / "runs.jsonl"

    def raw_dir(self, run_id: str) -> Path:
        return self.dir / "raw" / run_id

    def add_samples(self, samples: Iterable[Sample]) -> None:
        _append_lines(self.samples_path, (s.to_json() for s in samples))

    def add_run_records(self, records: Iterable[dict[str, Any]]) -> None:
        _append_lines(self.runs_path, (json.dumps(r, sort_keys=True) for r in records))

    def samples(self) -> list[Sample]:
        return [Sample.from_dict(d) for d in _read_lines(self.samples_path)]

    def run_records(self) -> list[dict[str, Any]]:
        return list(_read_lines(self.runs_path))

    def completed(self) -> set[tuple[str, str]]:
        """(run_id, host) pairs whose samples are stored: these are not run again."""
        return {(d["run_id"], d["host"]) for d in _read_lines(self.samples_path)
                if d["host"] != AGGREGATE_HOST}
