"""Asking the results index: `./lab results.query "SQL"` (read-only), and the samples of a date.

    ./lab results.query "SELECT backend, metric, avg(value) FROM samples GROUP BY 1, 2"
    ./lab report.compare quick@2026-11-21 quick@2026-12      a campaign's samples of a day, a month
    ./lab report.compare @2026-11-21 @2026-12-19             every campaign's samples of those days

`query` opens the index read-only three times over: SQLite's `mode=ro` URI (the file itself cannot be
written), `PRAGMA query_only` (no statement may write) and an authorizer that allows reading only (no
ATTACH of another file, no PRAGMA, no temporary table). A statement that writes is refused in one
line; so is more than one statement. Its rows are streamed as SQLite makes them, and bounded: more
than QUERY_ROWS of them (`--max-rows`), QUERY_SECONDS of work (`--seconds`: SQLite's progress handler looks at
the clock every STEPS steps), a value over LENGTH bytes or more than HEAP in all (PRAGMA
hard_heap_limit) is refused in one line; a recursive CTE without end is one of these, never a
MemoryError. The SQL reaches SQLite as it is (no bind parameters: ':name' in a string is text).
The tables and their columns are iolab.results.schema's (docs/DESIGN.md, "The results database").
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Select, create_engine, event, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from iolab.errors import UserError
from iolab.measures.samples import Sample
from iolab.results import QUERY_ROWS, QUERY_SECONDS
from iolab.results import db as results_db
from iolab.results import index as results_index
from iolab.results.schema import campaigns, sample_metadata, samples

DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2}([T ]\d{2}(:\d{2}(:\d{2})?)?)?)?)?$")


HEAP = 1 << 30  # bytes of memory SQLite may take in this process (PRAGMA hard_heap_limit)
LENGTH = 64 << 20  # bytes of one value (a string or a blob: randomblob, a group_concat without end)
STEPS = 10_000  # SQLite's virtual machine steps between two looks at the clock


def read_only(results: Path) -> Engine:
    """The index opened read-only: SQLite's mode=ro and PRAGMA query_only, and an authorizer that lets a
    statement only read (no ATTACH, no PRAGMA, no temporary table); its memory bounded (HEAP, LENGTH)."""
    eng = create_engine(f"sqlite:///{results_index.uri(results)}&uri=true", connect_args={"timeout": 60})

    @event.listens_for(eng, "connect")
    def _connect(dbapi: Any, _: Any) -> None:
        dbapi.execute("PRAGMA query_only=ON")
        dbapi.execute(f"PRAGMA hard_heap_limit={HEAP}")
        dbapi.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, LENGTH)
        dbapi.set_authorizer(_reads_only)

    return eng


def _reads_only(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _READS else sqlite3.SQLITE_DENY


_READS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


def query(
    results: Path, sql: str, max_rows: int = QUERY_ROWS, seconds: float = QUERY_SECONDS
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The columns and rows of one read-only statement over the index (caught up with the files first)."""
    with answer(results, sql, max_rows, seconds) as (columns, rows):
        return columns, list(rows)


@contextlib.contextmanager
def answer(
    results: Path, sql: str, max_rows: int = QUERY_ROWS, seconds: float = QUERY_SECONDS
) -> Iterator[tuple[list[str], Iterator[tuple[Any, ...]]]]:
    """The columns of one read-only statement, and its rows as SQLite makes them (streamed): more than `max_rows`
    of them, `seconds` of work, or more memory than HEAP is a UserError in one line (0: no cap, no limit). The SQL
    goes to SQLite as it is: a ':name' is SQLite's to read (in a string, text)."""
    results_index.open_index(results).dispose()
    eng = read_only(results)
    clock = _Clock(seconds)
    try:
        with eng.connect() as conn:
            conn.connection.dbapi_connection.set_progress_handler(clock.over, STEPS)  # type: ignore[union-attr]
            clock.start()
            found = conn.exec_driver_sql(sql)
            if not found.returns_rows:
                raise UserError("results.query answers questions: give one SELECT (or WITH … SELECT) statement")
            yield list(found.keys()), _capped(found, max_rows)
    except SQLAlchemyError as exc:
        raise _refusal(exc, clock) from None
    finally:
        eng.dispose()


class _Clock:
    """SQLite's progress handler: a statement past its time is interrupted (a non-zero answer)."""

    def __init__(self, seconds: float):
        self.seconds, self.deadline, self.stopped = seconds, math.inf, False

    def start(self) -> None:
        self.deadline = time.monotonic() + self.seconds if self.seconds > 0 else math.inf

    def over(self) -> int:
        self.stopped = time.monotonic() > self.deadline
        return int(self.stopped)


def _capped(found: Any, max_rows: int) -> Iterator[tuple[Any, ...]]:
    for number, row in enumerate(found, 1):
        if max_rows and number > max_rows:
            raise UserError(
                f"results.query: more than {max_rows} rows; narrow the statement (WHERE, LIMIT, GROUP BY) or give "
                "another cap: --max-rows N (0: none)"
            )
        yield tuple(row)


def _refusal(exc: SQLAlchemyError, clock: _Clock) -> UserError:
    why = results_db.why(exc)
    if clock.stopped:
        return UserError(
            f"results.query: stopped after {clock.seconds:g} s; narrow the statement or give it longer: "
            "--seconds N (0: no limit)"
        )
    if "out of memory" in why or "too big" in why:
        return UserError(
            f"results.query: the statement needs more memory than it may take ({why}; {HEAP >> 20} MiB in all, "
            f"{LENGTH >> 20} MiB a value); narrow it"
        )
    if "readonly" in why or "not authorized" in why:
        return UserError(
            f"results.query is read-only, and this statement writes ({why}); the files are the truth: "
            "change them, then `./lab results.index --rebuild`"
        )
    return UserError(f"results.query: {why}")


def as_json(columns: list[str], rows: Iterable[tuple[Any, ...]]) -> Iterator[str]:
    """A JSON array of the rows (an object each), a line at a time as they come."""
    yield "["
    for number, row in enumerate(rows):
        yield ("," if number else "") + json.dumps(dict(zip(columns, row, strict=True)), default=str)
    yield "]"


def samples_at(results: Path, spec: str) -> list[Sample]:
    """NAME@DATE (campaign NAME, its stores moved aside too) or @DATE (every campaign): the samples that started
    on that date (a prefix of ISO 8601: 2026, 2026-11, 2026-11-21, 2026-11-21T06)."""
    name, _, date = spec.partition("@")
    if not DATE.match(date):
        raise UserError(
            f"{spec!r}: after @ give a date as YYYY-MM-DD (or YYYY-MM, YYYY, YYYY-MM-DDTHH), e.g. quick@2026-11-21"
        )
    date = date.replace(" ", "T")
    eng = results_index.open_index(results)
    with eng.connect() as conn:
        names = campaign_names(conn)
        ids = [i for i, n in names.items() if n == name] if name else list(names)
        query = whole_samples().where(
            samples.c.campaign_id.in_(ids), samples.c.started_at >= date, samples.c.started_at < _after(date)
        )
        found = to_samples(conn.execute(query), names)
        if not found:
            days = select(campaigns.c.started).where(campaigns.c.campaign_id.in_(ids))
            known = sorted({str(d)[:10] for (d,) in conn.execute(days) if d})
            what = f"campaign {name}" if name else "any campaign"
            raise UserError(
                f"{spec}: no samples of {what} started then"
                + (f" ({'campaigns of' if not name else 'it ran on'}: {', '.join(known[-8:])})" if known else "")
                + ("" if ids or not name else f"; no campaign is named {name!r}: `./lab status` lists them")
            )
    return found


def _after(prefix: str) -> str:
    """The first string after every time that starts with `prefix` ('2026-11' → '2026-11\\x7f')."""
    return prefix + "\x7f"


def to_samples(rows: Any, campaign_names: dict[str, str], with_metadata: bool = True) -> list[Sample]:
    """Samples of rows of the samples table (their campaign's name from `campaign_names`: id → name)."""
    loads = json.loads
    return [
        Sample(
            campaign=campaign_names.get(r.campaign_id, r.campaign_id),
            run_id=r.run_id,
            repetition=r.repetition,
            host=r.host,
            backend=r.backend,
            workload=r.workload,
            metric=r.metric,
            value=r.value,
            unit=r.unit,
            started_at=r.started_at,
            ended_at=r.ended_at,
            params=loads(r.params),
            metadata=loads(r.metadata) if with_metadata else {},
        )
        for r in rows
    ]


def whole_samples() -> Select:
    """The samples with their metadata (to_samples' rows)."""
    return select(samples, sample_metadata.c.metadata).join(
        sample_metadata, sample_metadata.c.sample_id == samples.c.sample_id
    )


def campaign_names(conn: Connection) -> dict[str, str]:
    return dict(conn.execute(select(campaigns.c.campaign_id, campaigns.c.name)).all())
