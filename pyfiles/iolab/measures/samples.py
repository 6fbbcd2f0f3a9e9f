"""The sample contract and the results store of a campaign.

A sample is one measured value with everything needed to compare it later
(docs/DESIGN.md, "Contracts"). The store is append-only JSON lines:

    results/<campaign>/samples.jsonl   one sample a line
    results/<campaign>/runs.jsonl      one status record per run and host (ok / failed + error)
    results/<campaign>/raw/<run_id>/<host>/   the tools' own files

Appends are whole lines, fsynced: a write that fails or comes up short (a full or
read-only results disk) is undone — the file cut back to where it was — and raised
as StoreError, so the run is not counted as stored and a resume runs it again; so is a
sample whose value is not a finite number (NaN, ±Infinity are never written). A line
torn by a crash is ignored on read, and cut off (however long) by `preflight` and
before the next append, so the files never hold half a line.

Samples are read in one place, `ResultStore.samples` (and `completed`, for a resume),
and every line is checked there: JSON (no NaN or Infinity), an object with every field
of the contract in its type, a known unit, a finite value. A line that is not a sample
is a `BadLine` (the file, the line number and why): reports skip it and say how many
they skipped (`skipped_note`); a resume refuses the store, naming the line, as it could
not tell which runs are stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import json
import math
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from iolab.errors import StoreError, UserError
from iolab.measures import metrics

SCHEMA = "iolab.sample/1"
UNITS = frozenset({"B/s", "B", "IOPS", "s", "samples/s", "%", "ns", "cores", "count", "ops/s", "tokens/s"})
AGGREGATE_HOST = "*"
T = TypeVar("T")
# Free space a campaign needs on the results disk before its first run (a run's raw files are
# ~0.1–1 MiB; profilers' far more, and they say so when they fail).
MIN_FREE_BYTES = 64 << 20
# errno values that say the results disk, not the run, is at fault.


class CorruptStore(UserError):
    """A line of the store is not a record: a resume cannot tell what is stored, so it does not start."""


@dataclasses.dataclass(frozen=True)
class BadLine:
    """A line of a store's file that is not a record of it: skipped by reports, refused by a resume."""

    path: Path
    number: int  # from 1
    why: str

    def __str__(self) -> str:
        return f"{self.path} line {self.number}: {self.why}"


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
            raise ValueError(
                f"sample {self.metric!r}: unknown unit {self.unit!r} (iolab's: {', '.join(sorted(UNITS))})"
            )

    def to_json(self) -> str:
        # The fields as they are: dataclasses.asdict would deep-copy params and metadata first (≈ 0.3 ms a sample).
        fields = {name: getattr(self, name) for name in _FIELD_NAMES}
        return json.dumps(fields, sort_keys=True, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, data: Any) -> Sample:
        """A sample from a parsed line, every field checked; ValueError says what is wrong with it."""
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {_JSON_TYPES.get(type(data), type(data).__name__)}, not a sample object")
        missing = [f for f in _REQUIRED if f not in data]
        unknown = sorted(data.keys() - _FIELDS)
        if missing:
            raise ValueError(f"missing field(s) {', '.join(missing[:4])}" + (", …" if len(missing) > 4 else ""))
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(repr(u) for u in unknown[:4])}")
        wrong = [f for f, kind in _TYPES.items() if f in data and not _is(data[f], kind)]
        if wrong:
            raise ValueError(f"{wrong[0]} is {data[wrong[0]]!r:.40}, not {_TYPE_NAMES[_TYPES[wrong[0]]]}")
        if not _finite(data["value"]):
            raise ValueError(f"value {data['value']!r} is not a finite number")
        if data.get("schema", SCHEMA) != SCHEMA:
            raise ValueError(f"schema {data['schema']!r:.40}, not {SCHEMA}")
        sample = cls(**data)
        declared = metrics.of(sample.metric).unit  # "" for a metric another version declares
        if declared and sample.unit != declared:
            raise ValueError(f"{sample.metric} in {sample.unit}: the catalogue's unit for it is {declared}")
        return sample


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Sample))
_FIELDS = frozenset(_FIELD_NAMES)
_REQUIRED = [f.name for f in dataclasses.fields(Sample) if f.name not in ("params", "metadata", "schema")]
_TYPES: dict[str, type] = {f: str for f in _FIELDS} | {
    "repetition": int,
    "value": float,
    "params": dict,
    "metadata": dict,
}
_TYPE_NAMES = {str: "a string", int: "a whole number", float: "a number", dict: "an object"}
_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "true/false", type(None): "null"}


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # a whole number past a float's range
        return False


def _is(value: Any, kind: type) -> bool:
    """Whether a parsed JSON value is of `kind` (true and false are not numbers; a whole number is a float)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) if kind is float else isinstance(value, kind)


def _cut_torn_line(fd: int, chunk: int = 1 << 20) -> int:
    """Cut a last line torn by a crash (no newline), however long; return the file's size after."""
    size = end = os.fstat(fd).st_size
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return size
    keep = 0
    while end > 0:  # back to the last newline, a chunk at a time
        start = max(0, end - chunk)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            keep = start + newline + 1
            break
        end = start
    os.ftruncate(fd, keep)
    return keep


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


def _not_a_number(name: str) -> None:
    raise ValueError(f"{name} is not a finite number")


def parse_line(raw: bytes) -> Any:
    """One line's JSON; ValueError says why it is not JSON (NaN and Infinity are not)."""
    try:
        return json.loads(raw, parse_constant=_not_a_number)
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


def _read(path: Path, record: Callable[[Any], T]) -> tuple[list[T], list[BadLine]]:
    """Each whole line of `path` made a record by `record` (which raises ValueError for a line that is not
    one), and the lines that are not."""
    out, bad, _, _ = _read_tail(path, record, 0, 0)
    return out, bad


def _read_tail(
    path: Path, record: Callable[[Any], T], offset: int, lines: int
) -> tuple[list[T], list[BadLine], int, int]:
    """`_read` of the whole lines past byte `offset` (line `lines` + 1 on): the records, the lines that are not,
    and the offset and line count read up to (a torn last line waits for its newline)."""
    out: list[T] = []
    bad: list[BadLine] = []
    if not path.exists():
        return out, bad, offset, lines
    with path.open("rb") as handle:
        handle.seek(offset)
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # torn by a crash (or being appended to now): never half a record
            lines += 1
            offset += len(raw)
            try:
                out.append(record(parse_line(raw)))
            except ValueError as exc:
                bad.append(BadLine(path, lines, str(exc)))
    return out, bad, offset, lines


def _marks(path: Path, offset: int) -> bytes:
    """The bytes of `path` that stand for its first `offset`: its first 4 KiB and the 64 before `offset` (what
    the store's reads compare to tell a file appended to from one rewritten)."""
    with path.open("rb") as handle:
        head = handle.read(min(offset, 4096))
        handle.seek(max(0, offset - 64))
        return head + handle.read(min(offset, 64))


def _ends_at(path: Path, offset: int, marks: bytes) -> bool:
    """Whether `path`'s first `offset` bytes still look as they did (`_marks`): only appended to since."""
    try:
        return _marks(path, offset) == marks
    except OSError:
        return False


def _run_record(data: Any) -> dict[str, Any]:
    if not (isinstance(data, dict) and all(isinstance(data.get(k), str) for k in ("run_id", "host"))):
        raise ValueError("not a run record (an object with a run_id and a host)")
    return data


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
    """The results of one campaign under `root/<campaign>/`; `on_append` is called after each append."""

    def __init__(self, root: Path, campaign: str, on_append: Callable[[ResultStore], None] | None = None):
        self.dir = Path(root) / campaign
        self.on_append = on_append
        self.samples_path = self.dir / "samples.jsonl"
        self.runs_path = self.dir / "runs.jsonl"
        self._skipped: dict[tuple[Path, int], BadLine] = {}
        # The samples read so far and where: (inode, offset, lines, samples, _marks). The file
        # only grows while a campaign holds it, so each call reads only the lines appended since (a campaign's
        # loop asks after every run); a file whose bytes before the offset changed is read again whole.
        self._read_so_far: tuple[int, int, int, list[Sample], bytes] | None = None

    def raw_dir(self, run_id: str) -> Path:
        return self.dir / "raw" / run_id

    def add_samples(self, samples: Iterable[Sample], what: str = "the samples") -> None:
        """Append whole samples; one with a value, parameter or metadata that is not a finite number is never
        written (StoreError: nothing of `what` is kept)."""
        lines = []
        for s in samples:
            try:
                if not _finite(s.value):
                    raise ValueError(f"its value {s.value!r}")
                lines.append(s.to_json())
            except ValueError as exc:
                raise StoreError(
                    f"could not store {what} in {self.samples_path}: {s.metric} on {s.host} has a number that "
                    f"is not finite ({exc}); nothing of it was kept"
                ) from None
        _append_lines(self.samples_path, lines, what)
        self._appended()

    def add_run_records(self, records: Iterable[dict[str, Any]], what: str = "the run records") -> None:
        _append_lines(self.runs_path, (json.dumps(r, sort_keys=True) for r in records), what)
        self._appended()

    def _appended(self) -> None:
        """The lines are on disk: tell `on_append` (the results index, iolab.results.db, which never raises)."""
        if self.on_append is not None:
            self.on_append(self)

    @contextlib.contextmanager
    def appending(self) -> Iterator[None]:
        """The appends inside tell `on_append` once, when the last has ended (whether or not it failed)."""
        hook, self.on_append = self.on_append, None
        try:
            yield
        finally:
            self.on_append = hook
            self._appended()

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
        """Every sample of the store; a line that is not one is skipped (`skipped` says which)."""
        try:
            stat = os.stat(self.samples_path)
        except FileNotFoundError:
            self._read_so_far = None
            return []
        known = self._read_so_far
        if known is None or known[0] != stat.st_ino or not _ends_at(self.samples_path, known[1], known[4]):
            known = (stat.st_ino, 0, 0, [], b"")  # new, replaced, cut or rewritten: read it all again
        inode, offset, lines, samples, _ = known
        if offset < stat.st_size:
            more, bad, offset, lines = _read_tail(self.samples_path, Sample.from_dict, offset, lines)
            self._skipped.update({(b.path, b.number): b for b in bad})
            samples = samples + more
        self._read_so_far = (inode, offset, lines, samples, _marks(self.samples_path, offset))
        return list(samples)

    def run_records(self) -> list[dict[str, Any]]:
        """Every run record; a line that is not one is skipped (`skipped` says which)."""
        records, bad = _read(self.runs_path, _run_record)
        self._skipped.update({(b.path, b.number): b for b in bad})
        return records

    @property
    def skipped(self) -> list[BadLine]:
        """The lines the reads so far skipped, each once."""
        return list(self._skipped.values())

    def skipped_note(self) -> str | None:
        """One line on the lines the reads so far skipped: how many, where and why (the first three)."""
        bad = self.skipped
        if not bad:
            return None
        shown = "; ".join(f"{b.path.name} line {b.number}: {b.why}" for b in bad[:3])
        more = f"; and {len(bad) - 3} more" if len(bad) > 3 else ""
        return f"skipped {len(bad)} line(s) of {self.dir} that are not records: {shown}{more}"

    def completed(self) -> set[tuple[str, str]]:
        """(run_id, host) pairs whose samples are stored: these are not run again.

        Raises CorruptStore at a line that is not a sample: which runs are stored cannot be told.
        """
        samples, bad = _read(self.samples_path, Sample.from_dict)
        if bad:
            raise CorruptStore(
                f"{bad[0]} — a resume cannot tell which runs are stored ({len(bad)} such line(s)); "
                "fix or delete the line, or start over with --no-resume (the old results are moved aside)"
            )
        return {(s.run_id, s.host) for s in samples if s.host != AGGREGATE_HOST}
