"""./lab results.* and ./lab status: the results themselves, and the results database (results/iolab.db).

Flags here; the work in iolab.store.reparse, status, results_check, results_publish and results_query."""

from __future__ import annotations

from invoke import Collection

from iolab import paths
from iolab.errors import RunFailed, UserError
from iolab.report import tables as report_mod
from iolab.results import QUERY_ROWS, QUERY_SECONDS
from iolab.run.cli import echo, user_errors

from .common import task

# --- results ---------------------------------------------------------------------------------


@task(
    help={
        "campaign": "campaign name (default: the latest with results)",
        "write": "store the samples made again (the old ones are kept beside them) where they differ",
    }
)
@user_errors
def reparse(c, campaign=None, write=False):
    """Make a campaign's samples again from its runs' files and hold them against its store (exit 1 if they differ)."""
    from iolab.store import reparse as reparse_mod

    same, line = reparse_mod.check(report_mod.find_store(paths.results_root(), campaign), write)
    echo(line)
    if not same and not write:
        raise RunFailed(
            "the samples made again differ from the store; --write stores them (a run that cannot be made again "
            "keeps its stored samples)"
        )


@task(help={"campaign": "only this campaign (its name, or a store's directory), with each rule's first reason"})
@user_errors
def status(c, campaign=None):
    """Per campaign: runs ok / failed / missing / running, the rules its results break, what it compares with."""
    from rich.console import Console

    from iolab.report import status as status_mod

    found = status_mod.collect(paths.results_root(), campaign)
    Console().print(status_mod.table(found))
    if campaign:
        for s in found:
            echo("\n".join(status_mod.details(s)))


@task(help={"rebuild": "drop every row and read every store's files again"})
@user_errors
def index(c, rebuild=False):
    """Bring results/iolab.db up to date with the files (or rebuild it), and prove that the two agree."""
    from rich.console import Console

    from iolab.report import database
    from iolab.results import check as results_check

    found, line = results_check.run(paths.results_root(), rebuild)
    Console().print(database.agreement(found, paths.results_root()))
    echo(line)


@task(
    help={
        "to": "postgresql://USER@HOST[:PORT]/DATABASE (default: $IOLAB_RESULTS_DB; the password there, in "
        "~/.pgpass or PGPASSWORD)",
        "campaign": "only this store (default: every store)",
        "all": "send every row again, not only what this index has not sent there yet (the server keeps one of each)",
    }
)
@user_errors
def publish(c, to=None, campaign=None, all=False):
    """Copy the results index's rows into a PostgreSQL server (same schema; a re-publish adds nothing)."""
    from iolab.results import publish as results_publish

    echo(results_publish.run(paths.results_root(), to, campaign, all))


@task(
    positional=["sql"],
    help={
        "sql": "one SELECT statement over campaigns, runs, samples",
        "format": "table | json (streamed, a row a line)",
        "max_rows": f"refuse a statement that gives more rows than this (default {QUERY_ROWS}; 0: no cap)",
        "seconds": f"stop a statement that runs longer than this (default {QUERY_SECONDS:g}; 0: no limit)",
    },
)
@user_errors
def query(c, sql, format="table", max_rows=None, seconds=None):
    """Ask results/iolab.db anything, read-only: results.query "SELECT metric, count(*) FROM samples GROUP BY 1"."""
    from rich.console import Console

    from iolab.report import database
    from iolab.results import query as results_query

    if format not in ("table", "json"):
        raise UserError(f"unknown query format {format!r}; use table or json")
    cap = _number(max_rows, "--max-rows", QUERY_ROWS)
    limit = _number(seconds, "--seconds", QUERY_SECONDS)
    with results_query.answer(paths.results_root(), sql, int(cap), limit) as (columns, rows):
        if format == "json":
            for line in results_query.as_json(columns, rows):
                echo(line)
        else:
            Console().print(database.rows(columns, list(rows)))


def _number(value: str | None, flag: str, default: float) -> float:
    try:
        number = default if value is None else float(value)
    except ValueError:
        number = -1
    if not 0 <= number < float("inf"):
        raise UserError(f"{flag} {value!r}: give a number, 0 or more (0: none)")
    return number


results = Collection("results", reparse, index, publish, query)
