"""The sample contract and the results store of a campaign.

A sample is one measured value with everything needed to compare it later
(docs/DESIGN.md, "Contracts"). The store is append-only JSON lines:

    results/<campaign>/samples.jsonl   one sample a line
    results/<campaign>/runs.jsonl      one status record per run and host (ok / failed + error)
    results/<campaign>/raw/<run_id>/<host>/   the tools' own files

Appends are whole lines, fsynced: a write that fails or comes up short (a full or
read-only results disk) is undone — the file cut back to where it was — and raised
as StoreError, so the run is not counted as stored and a resume runs it again. A line
torn by a crash is ignored on read, and cut off by `repair` and before the next append,
so the files never hold half a line.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from iolab.errors import RunFailed

SCHEMA = "iolab.sample/1"
UNITS = frozenset({"B/s", "B", "IOPS", "s", "samples/s", "%", "ns", "cores", "count", "ops/s"})
AGGREGATE_HOST = "*"
# Free space a campaign needs on the results disk before its first run (a run's raw files are
# ~0.1–1 MiB; profilers' far more, and they say so when they fail).
MIN_FREE_BYTES = 64 << 20
# errno values that say the results disk, not the run, is at fault.
DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO)


class StoreError(RunFailed):
    """The results could not be written: what was being stored is not, and a resume runs it again."""


def utc_iso(epoch: float) -> str:
    """'2026-11-21T06:13:27.123456Z' from seconds since the epoch."""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


def _cut_torn_line(fd: int) -> int:
    """Cut a last line torn by a crash (no newline); return the file's size after."""
    size = os.fstat(fd).st_size
    if size:
        tail = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
        if not tail.endswith(b"\n"):
            size -= len(tail) - tail.rfind(b"\n") - 1
            os.ftruncate(fd, size)
    return size


def _append_lines(path: Path, records: Iterable[str], what: str) -> None:
    """Append whole lines and fsync them; on any failure, cut the file back and raise StoreError."""
    payload = "".join(line + "\n" for line in records).encode()
    if not payload:
        return
    fd, size = -1, 0
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        size = _cut_torn_line(fd)
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)  # short on a full disk: the next write says why
            if written <= 0:
                raise OSError(errno.ENOSPC, "no byte written")
            view = view[written:]
        os.fsync(fd)
    except OSError as exc:
        if fd >= 0:
            try:
                os.ftruncate(fd, size)  # never a torn line, never a sample counted that is not whole
            except OSError:
                pass
        raise StoreError(
            f"could not store {what} in {path}: {exc.strerror or exc}; nothing of it was kept "
            "(a resume runs it again); free space on the results disk or point $IOLAB_RESULTS "
            "elsewhere, then run the same command again"
        ) from None
    finally:
        if fd >= 0:
            os.close(fd)


def _read_lines(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with path.open("rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                return  # torn by a crash: never half a record
            yield json.loads(raw)


def _repair(path: Path) -> str | None:
    """Cut a torn last line of `path` (a crash mid-append); say what was cut."""
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDWR)
    try:
        before = os.fstat(fd).st_size
        after = _cut_torn_line(fd)
        if after != before:
            os.fsync(fd)
    finally:
        os.close(fd)
    return (
        f"{path}: cut a torn last line ({before - after} bytes) left by an interrupted write"
        if after != before
        else None
    )


class ResultStore:
    """The results of one campaign under `root/<campaign>/`."""

    def __init__(self, root: Path, campaign: str):
        self.dir = Path(root) / campaign
        self.samples_path = self.dir / "samples.jsonl"
        self.runs_path = self.dir / "runs.jsonl"

    def raw_dir(self, run_id: str) -> Path:
        return self.dir / "raw" / run_id

    def add_samples(self, samples: Iterable[Sample], what: str = "the samples") -> None:
        _append_lines(self.samples_path, (s.to_json() for s in samples), what)

    def add_run_records(self, records: Iterable[dict[str, Any]], what: str = "the run records") -> None:
        _append_lines(self.runs_path, (json.dumps(r, sort_keys=True) for r in records), what)

    def preflight(self, min_free: int = MIN_FREE_BYTES) -> list[str]:
        """Before a campaign's first run: the results directory is writable and has room; torn lines are cut.

        Raises StoreError (nothing has run yet); returns notes of what was repaired.
        """
        probe = self.dir / f".iolab-write-check-{os.getpid()}"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, b"iolab\n")
                os.fsync(fd)
            finally:
                os.close(fd)
                probe.unlink(missing_ok=True)
            notes = [note for path in (self.samples_path, self.runs_path) if (note := _repair(path))]
        except OSError as exc:
            raise StoreError(
                f"the results directory {self.dir} is not writable ({exc.strerror or exc}); "
                "fix it or point $IOLAB_RESULTS at a writable directory, then run again"
            ) from None
        free = shutil.disk_usage(self.dir).free
        if free < min_free:
            raise StoreError(
                f"the results directory {self.dir} has {free >> 20} MiB free, less than the "
                f"{min_free >> 20} MiB a campaign needs; free space or point $IOLAB_RESULTS "
                "elsewhere, then run again"
            )
        return notes

    def samples(self) -> list[Sample]:
        return [Sample.from_dict(d) for d in _read_lines(self.samples_path)]

    def run_records(self) -> list[dict[str, Any]]:
        return list(_read_lines(self.runs_path))

    def completed(self) -> set[tuple[str, str]]:
        """(run_id, host) pairs whose samples are stored: these are not run again."""
        return {(d["run_id"], d["host"]) for d in _read_lines(self.samples_path) if d["host"] != AGGREGATE_HOST}
