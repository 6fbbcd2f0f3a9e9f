"""./lab results.*: the results themselves."""

from __future__ import annotations

from invoke import Collection

from iolab import paths, results_tasks
from iolab import report as report_mod
from iolab.cli import echo, user_errors
from iolab.errors import RunFailed

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
    from iolab import reparse as reparse_mod

    same, line = reparse_mod.check(report_mod.find_store(paths.results_root(), campaign), write)
    echo(line)
    if not same and not write:
        raise RunFailed(
            "the samples made again differ from the store; --write stores them (a run that cannot be made again "
            "keeps its stored samples)"
        )


results = Collection("results", reparse, results_tasks.index, results_tasks.publish, results_tasks.query)
