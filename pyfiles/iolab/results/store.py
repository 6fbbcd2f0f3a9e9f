"""A campaign's store wired to the results database: each append lands in the index, and on a server.

    store = results_store.open_store(paths.results_root(), "quick")   # what bench.all and bench.fio write to

After every append to samples.jsonl or runs.jsonl (iolab.measures.samples.ResultStore's hook), `after_append`
indexes the store's new lines (iolab.results.db) and, where a server is named ($IOLAB_RESULTS_DB, or
the campaign's `results_db:`), publishes them there (iolab.results.publish). Neither can fail the run:
the lines are stored already, and a failure of any kind (a server's URL that does not parse included) is one
line on stderr that never quotes a password; the next command's catch-up, the next run's publish or
`./lab results.publish` does what this could not.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from pathlib import Path

from iolab.errors import UserError
from iolab.measures.samples import ResultStore
from iolab.units import printable


def open_store(results: Path, campaign: str) -> ResultStore:
    """A campaign's store whose every append also lands in the index (and on the server named for it). The index's
    modules (SQLAlchemy's ≈ 0.2 s) load meanwhile in a thread of their own, and its engine is made there (its file
    opened, its layout checked: ≈ 0.05 s), while the command mounts and prepares its first run, so that its first
    append does not wait for them between that run and the next."""
    store = ResultStore(results, campaign, on_append=after_append)
    _READYING[store.dir.parent] = thread = threading.Thread(target=_index_ready, args=(results,), name="iolab-index")
    thread.start()
    return store


_READYING: dict[Path, threading.Thread] = {}  # results directory → its open_store's thread, until the first append


def _index_ready(results: Path) -> None:
    with contextlib.suppress(Exception):  # after_append does it again, and says what fails
        importlib.import_module("iolab.results.publish")
        results_db = importlib.import_module("iolab.results.db")
        results_db.engine(results_db.path_of(results))  # cached: the appends' engine


def after_append(store: ResultStore) -> None:
    """The store's files grew: index its new lines, then publish them where a server is named. Never raises.
    SQLAlchemy is imported here, at the first append (≈ 0.2 s): a command that stores nothing never pays it."""
    results = store.dir.parent
    if readying := _READYING.pop(results, None):
        # first: one engine (db.engine's cache), not a second made beside the thread's; and SQLAlchemy's modules
        # imported in one thread at a time (imported in two at once, its circular imports meet a module half made)
        readying.join()
    from sqlalchemy.exc import SQLAlchemyError

    from iolab.results import db as results_db
    from iolab.results import publish as results_publish

    results_db.crash_point("index")  # tests: killed between the append and the index's write
    try:
        results_db.catch_up(results_db.engine(results_db.path_of(results)), results, only=store.dir.name)
    except (SQLAlchemyError, OSError) as exc:
        _warn(
            f"the results index {results_db.path_of(results)} is behind ({results_db.why(exc)}); "
            "the next command catches it up"
        )
        return
    later = "the next run or `./lab results.publish` sends what is missing"
    try:
        target = results_publish.target_for(store.dir)
        if target is not None:
            results_publish.publish(results, target, [store.dir.name], caught_up=True)
    except UserError as exc:
        _warn(f"{exc}; {later}")
    except Exception as exc:  # noqa: BLE001 - never the campaign's end; its text may quote the password: not shown
        _warn(f"publishing {store.dir.name}'s new lines failed ({type(exc).__name__}); {later}")


def _warn(line: str) -> None:
    print(f"iolab: {printable(line)}", file=sys.stderr)
