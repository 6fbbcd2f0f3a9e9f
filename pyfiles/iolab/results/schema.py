"""The results database's schema, written once for SQLite (the index) and PostgreSQL (a lab's server).

SQLAlchemy Core renders these tables for either dialect; nothing here is dialect-specific. The
files stay the truth (results/<store>/samples.jsonl, runs.jsonl, campaign.json): every row is
derived from one of their lines, so the database can be rebuilt at any time.

    campaigns   one per store (results/<store>/), keyed by the campaign's id (iolab.store.ledger): a store
                moved aside by --no-resume keeps its id, so it is the same campaign, renamed
    runs        one per run record (a run on one host, one attempt): status and error
    samples     one per sample line: metric, value, unit, host, times, flags, params (JSON)
    sample_metadata  its metadata (JSON), one row per sample, apart so that scans of samples stay narrow

Row ids are stable: a hash of the campaign's id, the line's offset and its bytes (`row_id`), so
indexing or publishing the same line twice is a no-op, and a line written twice in a file is two
rows, as the file counts it. `offset` is the line's byte offset in its file: the order of the
file, and what a publish resumes from. JSON columns are text (the line's own JSON, re-serialised),
so both dialects store them alike.

LOCAL holds the index's own bookkeeping, in SQLite only: how far each file is indexed (`indexed`)
and how far each campaign is published to each server (`published`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import BigInteger, Column, Float, Index, Integer, MetaData, String, Table, Text, delete, select
from sqlalchemy.engine import Connection

SHARED = MetaData()
LOCAL = MetaData()
ID = String(32)


def _line(key: str, *columns: Column | Index) -> list[Column | Index]:
    """A table of one file's lines (runs.jsonl, samples.jsonl): its row id (`row_id`), its campaign, the line's
    offset in the file and its run, then `columns`."""
    return [
        Column(key, ID, primary_key=True),
        Column("campaign_id", ID, nullable=False),
        Column("offset", BigInteger, nullable=False),
        Column("run_id", Text, nullable=False),
        *columns,
    ]


campaigns = Table(
    "campaigns",
    SHARED,
    Column("campaign_id", ID, primary_key=True),
    Column("store", Text, nullable=False),  # its directory under results/ (quick, quick.20261121T060000Z)
    Column("name", Text, nullable=False),  # the campaign's own name
    Column("file_hash", String(64)),  # sha256 of the campaign as loaded (its canonical JSON)
    Column("started", Text),  # UTC, ISO 8601
    Column("ended", Text),  # the last sample's end or run record's time
    Column("controller", Text),  # host name of the controller that ran it
    Column("iolab_version", Text),
    Column("dataset", Text),  # a hash of the data set's identity (kind, files, seed, ...); NULL without one
    Column("plan", Text),  # JSON: the planned runs (run_id, backend, workload, repetition, hosts, config_hash)
)
runs = Table(
    "runs",
    SHARED,
    *_line(
        "record_id",
        Column("config_hash", Text),  # the workload point's hash (iolab.store.ledger.config_hash), from the plan
        Column("backend", Text),
        Column("workload", Text),
        Column("repetition", Integer),
        Column("host", Text, nullable=False),
        Column("status", Text),  # ok | failed
        Column("error", Text),
        Column("at", Text),
        Index("runs_by_campaign", "campaign_id", "run_id"),
    ),
)
samples = Table(
    "samples",
    SHARED,
    *_line(
        "sample_id",
        Column("repetition", Integer, nullable=False),
        Column("host", Text, nullable=False),
        Column("backend", Text, nullable=False),
        Column("workload", Text, nullable=False),
        Column("metric", Text, nullable=False),
        Column("value", Float, nullable=False),
        Column("unit", Text, nullable=False),
        Column("started_at", Text, nullable=False),
        Column("ended_at", Text, nullable=False),
        Column("flags", Text, nullable=False),  # JSON list: the flags recorded with the run (metadata.validity)
        Column("params", Text, nullable=False),  # JSON object
        # report.history: a metric per backend/workload over time; status and each campaign's rows: its runs.
        # (report.compare @DATE reads a campaign's rows, or all: one index fewer for every insert.)
        Index("samples_by_series", "metric", "backend", "workload", "started_at"),
        Index("samples_by_run", "campaign_id", "run_id"),
    ),
)
# A sample's metadata (≈1.5 KB of provenance a host's sample) beside it, one row each: the questions that never
# read it (history, counts, the campaigns' list) scan narrow rows; `JOIN sample_metadata USING (sample_id)`.
sample_metadata = Table(
    "sample_metadata",
    SHARED,
    Column("sample_id", ID, primary_key=True),
    Column("metadata", Text, nullable=False),  # JSON object
)

indexed = Table(
    "indexed",
    LOCAL,
    Column("store", Text, primary_key=True),
    Column("file", Text, primary_key=True),  # samples.jsonl | runs.jsonl
    Column("campaign_id", ID, nullable=False),
    Column("offset", BigInteger, nullable=False),  # bytes indexed: whole lines only
    Column("inode", BigInteger, nullable=False),
    Column("head", String(64), nullable=False),  # sha256 of the file's first bytes (up to 4 KiB, up to offset)
    Column("bad", Integer, nullable=False),  # lines up to offset that are not records (iolab.measures.samples.BadLine)
)
published = Table(
    "published",
    LOCAL,
    Column("target", String(64), primary_key=True),  # a hash of the server, database and user (no secret)
    Column("campaign_id", ID, primary_key=True),
    Column("kind", Text, primary_key=True),  # samples | runs
    Column("offset", BigInteger, nullable=False),  # rows up to this offset of the campaign's file are there
)
# A campaign's marks are dropped when its store is read again (rewritten, replaced, cut: iolab.results.db), and by a
# rebuild: without a mark, a publish replaces what the server holds of the campaign (iolab.results.publish).


def row_id(campaign_id: str, offset: int, line: bytes) -> str:
    """A row's stable id: its campaign, its line's offset in its file and its bytes (the same line of the same
    campaign, read again, the same id; a line repeated further on, a row of its own, as the files count it)."""
    return hashlib.sha256(f"{campaign_id}\n{offset}\n".encode() + line).hexdigest()[:32]


def forget(conn: Connection, campaign_id: str, *tables: Table) -> int:
    """Delete the campaign's rows of `tables` (a sample's metadata with it); how many rows of them there were."""
    gone = 0
    for table in tables:
        if table is samples:
            theirs = select(samples.c.sample_id).where(samples.c.campaign_id == campaign_id)
            conn.execute(delete(sample_metadata).where(sample_metadata.c.sample_id.in_(theirs)))
        gone += max(conn.execute(delete(table).where(table.c.campaign_id == campaign_id)).rowcount, 0)
    return gone


def put(conn: Connection, table: Table, rows: Sequence[dict[str, Any]], update: bool = False) -> int:
    """Insert `rows` (each a value for every column), skipping a row whose key is there already (`update`:
    replacing its other columns); return how many rows were inserted or replaced.

    One statement per table and dialect, compiled once, run as the driver's executemany: SQLAlchemy's
    per-row work would double the index's time for 100,000 samples (docs/PERFORMANCE.md).
    """
    if not rows:
        return 0
    key = (conn.dialect.name, conn.dialect.driver, table.name, update)
    if key not in _STATEMENTS:
        _STATEMENTS[key] = _statement(conn.dialect, table, update)
    sql, order = _STATEMENTS[key]
    params: Any = list(map(itemgetter(*order), rows)) if order else list(rows)
    return max(conn.exec_driver_sql(sql, params).rowcount, 0)


_STATEMENTS: dict[tuple[str, str, str, bool], tuple[str, tuple[str, ...] | None]] = {}


def _statement(dialect: Any, table: Table, update: bool) -> tuple[str, tuple[str, ...] | None]:
    """INSERT … ON CONFLICT of `table` for `dialect` (SQLite's or PostgreSQL's), and its parameters' order
    where the driver's are positional."""
    if dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
    keys = [c.name for c in table.primary_key]
    stmt = insert(table)
    if update:
        stmt = stmt.on_conflict_do_update(
            index_elements=keys, set_={c.name: stmt.excluded[c.name] for c in table.columns if c.name not in keys}
        )
    else:
        stmt = stmt.on_conflict_do_nothing(index_elements=keys)
    compiled = stmt.compile(dialect=dialect)
    return str(compiled), (tuple(compiled.positiontup) if compiled.positional and compiled.positiontup else None)
