"""The results index: results/iolab.db, SQLite, rebuilt from the files whenever asked.

The files stay the truth (iolab.measures.samples: samples.jsonl, runs.jsonl; iolab.store.ledger: campaign.json);
this database is an index of them for the questions that span campaigns (report.history,
report.compare @DATE, results.query, status). Its tables are iolab.results.schema's.

**Crash repair.** For each file the index keeps how far it has read it (`indexed`: the byte offset
of the end of the last whole line, the file's inode, a hash of its head), and it moves that offset
in the same SQLite transaction as the rows of the lines it read. `catch_up` reads every file past
its offset. So a controller killed between a JSONL append and the index's write leaves the offset
behind, and the next command reads the lines again; a transaction killed halfway is rolled back by
SQLite; and rows are keyed by stable ids (results_schema.row_id), so a line read twice is one row.
A file whose inode or head changed, that shrank or vanished (a store moved aside by --no-resume, a
store deleted or replaced) has its campaign's rows dropped and read again from its start: a store
moved aside is the same campaign (its ledger's id) under its new directory.

**Who writes.** `ResultStore.add_samples`/`add_run_records` (iolab.measures.samples) call their hook once
the lines are on disk: the store's new lines go in, and on to a PostgreSQL server where one is
named (iolab.results.store, iolab.results.publish). Nothing there can fail a run: a failure is one
line on stderr and the next command catches up. The commands that read the index (`connect`) catch up every store
first. A writer takes SQLite's write lock as its transaction begins (BEGIN IMMEDIATE), so two
commands never index the same line at once.

`verify` is `results.index`'s proof: per store, the lines of the files and the rows of the index,
counted, and a checksum of each side (sha256 of the sorted row ids and values).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
from sqlalchemy import create_engine, delete, event, func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from iolab.errors import UserError
from iolab.measures.samples import _TYPES as FIELD_TYPES
from iolab.measures.samples import SCHEMA, UNITS, Sample, _run_record, parse_line
from iolab.results.schema import (
    LOCAL,
    SHARED,
    campaigns,
    forget,
    indexed,
    published,
    put,
    row_id,
    runs,
    sample_metadata,
    samples,
)
from iolab.store import ledger
from iolab.units import printable

FILE = "iolab.db"
SAMPLES, RUNS = "samples.jsonl", "runs.jsonl"
HEAD = 4096  # bytes of a file's head that identify it
CHUNK = 32 << 20  # bytes read at a time (memory stays bounded on a large store)
BUSY_S = 60  # seconds a command waits for another that holds the index's write lock
VERSION = 2  # PRAGMA user_version: an index of another layout is rebuilt (2: row ids with the line's offset)


class _Validity(msgspec.Struct):
    flags: list[str] = []


class _Metadata(msgspec.Struct):
    validity: _Validity | None = None


def _typed(name: str) -> tuple[Any, ...]:
    """A field of the sample contract (iolab.measures.samples.Sample) as msgspec reads it: params and metadata kept as
    their JSON text."""
    if name in ("params", "metadata"):
        return (name, msgspec.Raw, msgspec.Raw(b"{}"))
    if name == "schema":
        return (name, str, SCHEMA)
    kind = FIELD_TYPES[name]
    return (name, kind if kind in (int, float) else str)


# A sample line as iolab.measures.samples.Sample reads it, field for field (unknown fields refused), in C.
_Line = msgspec.defstruct("_Line", [_typed(f.name) for f in dataclasses.fields(Sample)], forbid_unknown_fields=True)
_LINE = msgspec.json.Decoder(_Line)
_METADATA = msgspec.json.Decoder(_Metadata)


# --- the database -------------------------------------------------------------------------------


def path_of(results: Path) -> Path:
    return Path(results) / FILE


@functools.cache
def engine(path: Path) -> Engine:
    """The index at `path`, created (or rebuilt, if of another layout) on first use."""
    eng = create_engine(f"sqlite:///{path}", connect_args={"timeout": BUSY_S})

    @event.listens_for(eng, "connect")
    def _connect(dbapi: Any, _: Any) -> None:
        dbapi.isolation_level = None  # transactions are ours: BEGIN IMMEDIATE below
        dbapi.execute("PRAGMA journal_mode=WAL")
        dbapi.execute("PRAGMA synchronous=NORMAL")  # durable against a killed process; the files are the truth
        dbapi.execute("PRAGMA cache_size=-65536")  # 64 MiB: a rebuild's inserts into the indexes stay in memory

    @event.listens_for(eng, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    with eng.begin() as conn:
        if conn.exec_driver_sql("PRAGMA user_version").scalar() != VERSION:
            LOCAL.drop_all(conn)
            SHARED.drop_all(conn)
            SHARED.create_all(conn)
            LOCAL.create_all(conn)
            conn.exec_driver_sql(f"PRAGMA user_version={VERSION}")
    return eng


def caught_up(results: Path, rebuild: bool = False) -> tuple[Engine, Caught]:
    """The index of `results` and what catching it up with its files (`rebuild`: from nothing) did."""
    try:
        path_of(results).parent.mkdir(parents=True, exist_ok=True)
        eng = engine(path_of(results))
        return eng, catch_up(eng, Path(results), rebuild=rebuild)
    except (SQLAlchemyError, OSError) as exc:
        if "database is locked" in why(exc):
            raise UserError(
                f"the results index {path_of(results)} is held by another command (it wrote for over {BUSY_S} s); "
                "run this again when that one has ended"
            ) from None
        raise UserError(
            f"the results index {path_of(results)} cannot be brought up to date: {why(exc)}; "
            f"check that {results} is writable, or delete {FILE} (the files rebuild it)"
        ) from None


def why(exc: BaseException) -> str:
    """A database error in one line: the driver's first line (SQLAlchemy adds the statement and a link)."""
    orig = getattr(exc, "orig", None) or exc
    lines = [line.strip() for line in str(orig).splitlines() if line.strip()]
    return printable(lines[0] if lines else type(orig).__name__)


# --- catching up ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Caught:
    """What a catch-up did: rows added, stores dropped to be read again."""

    samples: int = 0
    runs: int = 0
    reread: list[str] = dataclasses.field(default_factory=list)


def stores(results: Path) -> list[str]:
    """The store directories under `results` (a campaign's, or one moved aside; one that has only begun has its
    ledger), by name."""
    found = {p.parent.name for name in (SAMPLES, RUNS, ledger.FILE) for p in Path(results).glob(f"*/{name}")}
    return sorted(found)


def catch_up(eng: Engine, results: Path, only: str | None = None, rebuild: bool = False) -> Caught:
    """Index every line of the files not indexed yet (`only`: of that store); `rebuild`: all, from nothing.

    First, in one transaction, the stores whose files changed under the index are dropped (`rebuild`: all);
    then each chunk of each file is one transaction: its rows and the file's new offset, together."""
    caught = Caught()
    with eng.begin() as conn:
        if rebuild:
            for table in (*SHARED.sorted_tables, indexed, published):
                conn.execute(delete(table))
        known = _known(conn)
        for store, files in known.items():
            if only in (None, store) and _stale(results / store, files):
                _drop(conn, store, next(iter(files.values()))["campaign_id"])
                caught.reread.append(store)
    for store in [only] if only else stores(results):
        _index_store(eng, results / store, caught)
    return caught


def _known(conn: Connection) -> dict[str, dict[str, Any]]:
    """store → file → what is indexed of it."""
    known: dict[str, dict[str, Any]] = {}
    for row in conn.execute(select(indexed)).mappings():
        known.setdefault(row["store"], {})[row["file"]] = dict(row)
    return known


def _stale(store_dir: Path, files: dict[str, Any]) -> bool:
    """Whether what was indexed of the store is no longer its files (moved aside, replaced, cut, deleted)."""
    found = ledger.read(store_dir)
    ids = {f["campaign_id"] for f in files.values()}
    if found is None or not ids & {found["id"], _copy_id(found["id"], store_dir.name)}:
        return True
    for name, row in files.items():
        try:
            stat = (store_dir / name).stat()
        except FileNotFoundError:
            return True
        if name == ledger.FILE:
            continue  # replaced whole at each start: its id (above) is what counts
        if (
            stat.st_ino != row["inode"]
            or stat.st_size < row["offset"]
            or _head(store_dir / name, row["offset"]) != row["head"]
        ):
            return True
    return False


def _drop(conn: Connection, store: str, campaign_id: str) -> None:
    """The store's rows, read again next; and how far it was published: what a server holds of it is replaced."""
    forget(conn, campaign_id, samples, runs, campaigns, published)
    conn.execute(delete(indexed).where(indexed.c.store == store))


def _head(path: Path, offset: int) -> str:
    with path.open("rb") as handle:
        return hashlib.sha256(handle.read(min(offset, HEAD))).hexdigest()


def _copy_id(campaign_id: str, store: str) -> str:
    """The id of a store that holds a copy of another's ledger (its own directory tells them apart)."""
    return hashlib.sha256(f"{campaign_id}\n{store}".encode()).hexdigest()[:32]


def _first_line(store_dir: Path) -> bytes | None:
    for name in (SAMPLES, RUNS):
        try:
            with (store_dir / name).open("rb") as handle:
                line = handle.readline()
        except FileNotFoundError:
            continue
        if line.endswith(b"\n"):
            return line
    return None


def _campaign_id(conn: Connection, store_dir: Path, found: dict[str, Any]) -> str:
    """The ledger's id, unless another store indexed now holds a copy of the same ledger."""
    holder = conn.execute(select(campaigns.c.store).where(campaigns.c.campaign_id == found["id"])).scalar()
    if holder is None or holder == store_dir.name or not (store_dir.parent / holder).is_dir():
        return str(found["id"])
    return _copy_id(found["id"], store_dir.name)


def _index_store(eng: Engine, store_dir: Path, caught: Caught) -> None:
    found = ledger.read(store_dir)
    if found is None:
        first = _first_line(store_dir)
        if first is None:
            return  # nothing whole in it yet
        found = ledger.adopt(store_dir, first, _name_of(first, store_dir.name))
    with eng.begin() as conn:
        mine = conn.execute(select(indexed.c.campaign_id).where(indexed.c.store == store_dir.name)).scalar()
        campaign_id = mine or _campaign_id(conn, store_dir, found)
    configs = {p["run_id"]: p.get("config_hash") for p in found.get("plan") or [] if isinstance(p, dict)}
    times: list[str] = []
    for name in (SAMPLES, RUNS):
        if (store_dir / name).exists():
            while _index_chunk(eng, store_dir, name, campaign_id, configs, caught, times):
                pass
    with eng.begin() as conn:
        if (store_dir / ledger.FILE).exists():  # a store with a ledger and no line yet is a campaign begun
            entry = {"store": store_dir.name, "file": ledger.FILE, "campaign_id": campaign_id, "offset": 0}
            put(conn, indexed, [{**entry, "bad": 0, "inode": 0, "head": ""}], update=True)
        _campaign_row(conn, store_dir.name, campaign_id, found, times)


def _index_chunk(
    eng: Engine, store_dir: Path, name: str, campaign_id: str, configs: dict, caught: Caught, times: list[str]
) -> bool:
    """One transaction: the next chunk of whole lines of the file past its offset (read inside the transaction:
    another command's catch-up may have moved it), their rows, the new offset. Whether there was one."""
    path = store_dir / name
    with eng.begin() as conn:
        where = (indexed.c.store == store_dir.name) & (indexed.c.file == name)
        row = conn.execute(select(indexed.c.offset, indexed.c.bad).where(where)).first()
        start, bad = (row.offset, row.bad) if row else (0, 0)
        end, lines = chunk_of(path, start)
        if row is not None and end == start:
            return False
        if name == SAMPLES:
            rows = sample_rows(campaign_id, lines, configs)
            caught.samples += put(conn, samples, rows)
            put(conn, sample_metadata, [{"sample_id": r["sample_id"], "metadata": r["metadata"]} for r in rows])
            times += [max(r["ended_at"] for r in rows)] if rows else []
        else:
            rows = run_rows(campaign_id, lines, configs)
            caught.runs += put(conn, runs, rows)
            times += [max(r["at"] or "" for r in rows)] if rows else []
        entry = {"store": store_dir.name, "file": name, "campaign_id": campaign_id, "offset": end}
        put(conn, indexed, [{**entry, "bad": bad + len(lines) - len(rows), "inode": path.stat().st_ino,
                             "head": _head(path, end)}], update=True)  # fmt: skip
        return end != start


def _name_of(line: bytes, store: str) -> str:
    try:
        data = parse_line(line)
    except ValueError:
        data = None
    return str(data["campaign"]) if isinstance(data, dict) and "campaign" in data else store.split(".", 1)[0]


def _campaign_row(conn: Connection, store: str, campaign_id: str, found: dict[str, Any], times: list[str]) -> None:
    row = conn.execute(select(campaigns).where(campaigns.c.campaign_id == campaign_id)).mappings().first()
    started = found.get("started") or (row["started"] if row else None)
    if not started:  # a store from before ledgers: its first sample's start
        started = conn.execute(
            select(func.min(samples.c.started_at)).where(samples.c.campaign_id == campaign_id)
        ).scalar()
    ended = max([t for t in [*times, row["ended"] if row else None] if t], default=None)
    put(
        conn,
        campaigns,
        [
            {
                "campaign_id": campaign_id,
                "store": store,
                "name": found.get("name") or store,
                "file_hash": found.get("file_hash"),
                "started": started,
                "ended": ended,
                "controller": found.get("controller"),
                "iolab_version": found.get("iolab_version"),
                "dataset": found.get("dataset"),
                "plan": json.dumps(found.get("plan") or [], sort_keys=True),
            }
        ],
        update=True,
    )


def chunk_of(path: Path, offset: int) -> tuple[int, list[tuple[int, bytes]]]:
    """(the offset after them, [(line offset, line without its newline), ...]): the whole lines of up to CHUNK
    bytes from `offset` (more, to end a longer line); a torn last line (a crash mid-append, or an append in
    progress) is left for later."""
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read(CHUNK)
        while data and b"\n" not in data[-CHUNK:]:
            more = handle.read(CHUNK)
            if not more:
                break
            data += more
    end = data.rfind(b"\n") + 1
    out, position = [], offset
    for line in data[: end - 1].split(b"\n") if end else []:
        out.append((position, line))
        position += len(line) + 1
    return offset + end, out


def lines_of(path: Path, offset: int) -> Iterator[list[tuple[int, bytes]]]:
    """Every chunk of whole lines from `offset` (chunk_of's)."""
    while True:
        offset, lines = chunk_of(path, offset)
        if not lines:
            return
        yield lines


def sample_rows(campaign_id: str, lines: list[tuple[int, bytes]], _: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of the lines that iolab.measures.samples reads as samples (a line it skips is not indexed either)."""
    rows = []
    for offset, raw in lines:
        row = _fast_row(raw) or _checked_row(raw)
        if row is not None:
            row.update(sample_id=row_id(campaign_id, offset, raw), campaign_id=campaign_id, offset=offset)
            rows.append(row)
    return rows


def _fast_row(raw: bytes) -> dict[str, Any] | None:
    """The row of a well-formed sample line, typed by msgspec; None for anything it doubts (then checked
    as iolab.measures.samples checks it)."""
    try:
        line: Any = _LINE.decode(raw)
        meta = _METADATA.decode(line.metadata)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    params, metadata = bytes(line.params), bytes(line.metadata)
    if line.unit not in UNITS or line.schema != SCHEMA or not math.isfinite(line.value):
        return None
    if params[:1] != b"{" or metadata[:1] != b"{":
        return None
    flags = meta.validity.flags if meta.validity else None
    return {
        "run_id": line.run_id,
        "repetition": line.repetition,
        "host": line.host,
        "backend": line.backend,
        "workload": line.workload,
        "metric": line.metric,
        "value": line.value,
        "unit": line.unit,
        "started_at": line.started_at,
        "ended_at": line.ended_at,
        "flags": json.dumps(flags) if flags else "[]",
        "params": params.decode(),
        "metadata": metadata.decode(),
    }


_COLUMNS = ("run_id", "repetition", "host", "backend", "workload", "metric", "value", "unit", "started_at", "ended_at")


def _checked_row(raw: bytes) -> dict[str, Any] | None:
    try:
        sample = Sample.from_dict(parse_line(raw))
    except ValueError:
        return None
    validity = sample.metadata.get("validity")
    flags = validity.get("flags") if isinstance(validity, dict) else None
    return {
        **{f: getattr(sample, f) for f in _COLUMNS},
        "value": float(sample.value),
        "flags": json.dumps([str(f) for f in flags] if isinstance(flags, list) else []),
        "params": json.dumps(sample.params, sort_keys=True),
        "metadata": json.dumps(sample.metadata, sort_keys=True),
    }


def run_rows(campaign_id: str, lines: list[tuple[int, bytes]], configs: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for offset, raw in lines:
        try:
            record = _run_record(parse_line(raw))
        except ValueError:
            continue
        repetition = record.get("repetition")
        rows.append(
            {
                "record_id": row_id(campaign_id, offset, raw),
                "campaign_id": campaign_id,
                "offset": offset,
                "run_id": record["run_id"],
                "config_hash": configs.get(record["run_id"]),
                "backend": _text(record.get("backend")),
                "workload": _text(record.get("workload")),
                "repetition": repetition if type(repetition) is int else None,
                "host": record["host"],
                "status": _text(record.get("status")),
                "error": _text(record.get("error")),
                "at": _text(record.get("at")),
            }
        )
    return rows


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json.dumps(value)


# --- crash points ---------------------------------------------------------------------------------------

CRASH_ENV = "IOLAB_TEST_CRASH_AT"


def crash_point(name: str) -> None:
    """Tests only: SIGKILL this process where $IOLAB_TEST_CRASH_AT names `name` (`NAME` or `NAME:N`, the Nth time
    it is reached), to prove that the index and a publish recover from a crash at that point."""
    wanted = os.environ.get(CRASH_ENV, "")
    if not wanted or wanted.split(":")[0] != name:
        return
    _REACHED[name] = _REACHED.get(name, 0) + 1
    if _REACHED[name] >= int((wanted.split(":") + ["1"])[1]):
        os.kill(os.getpid(), signal.SIGKILL)


_REACHED: dict[str, int] = {}
