"""The results index a command reads (`open_index`): caught up with the files (iolab.results.db), or where the
results directory cannot be written (a read-only mount, an archive), what is there.

Every read command (results.query, status, report.history, report.compare NAME@DATE) brings the index up to date
with the files first, which writes. Where the directory cannot be written, a line on stderr says what is read
instead:

- its index as it is, opened read-only and immutable (SQLite takes no lock and makes no journal, and reads no
  write-ahead log a killed writer left): it may be behind its files;
- without an index, one made from its files for this command, in a temporary directory removed at exit.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from iolab.results import db as results_db
from iolab.units import printable


def writable(results: Path) -> bool:
    path = results_db.path_of(results)
    return os.access(results, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))


def open_index(results: Path) -> Engine:
    """The index of `results`, caught up with its files; a UserError in one line when it cannot be written. Where
    `results` cannot be written, what is there: its index as it is, or one made from its files for now."""
    if writable(results):
        return results_db.caught_up(results)[0]
    if not results_db.path_of(results).exists():
        return _made_for_now(Path(results))
    _say(f"the results directory {results} is read-only: its index is read as it is, and may be behind its files")
    return create_engine(f"sqlite:///{uri(results)}&uri=true")


def uri(results: Path) -> str:
    """The SQLite URI of the index that open_index(results) gave, read-only."""
    made = _MADE.get(Path(results))
    if made is not None:
        return f"file:{made}?mode=ro"
    return f"file:{results_db.path_of(results)}?mode=ro" + ("" if writable(results) else "&immutable=1")


_MADE: dict[Path, Path] = {}


def _made_for_now(results: Path) -> Engine:
    if results not in _MADE:
        where = Path(tempfile.mkdtemp(prefix="iolab-index-"))
        atexit.register(shutil.rmtree, where, True)
        _MADE[results] = where / results_db.FILE
        _say(f"the results directory {results} is read-only and has no index: one is made from its files for now")
    eng = results_db.engine(_MADE[results])
    results_db.catch_up(eng, results)
    return eng


@functools.cache
def _say(line: str) -> None:
    print(f"iolab: {printable(line)}", file=sys.stderr)
