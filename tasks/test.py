"""./lab test and ./lab lint."""

from __future__ import annotations

import sys
from pathlib import Path

from invoke.exceptions import Exit

from iolab import paths
from iolab.run.cli import echo

from .common import task

# --- test --------------------------------------------------------------------------------

# The first CI stage: fast, and failing before the slow integration tests start.
LINTERS = (
    ["ruff", "check", "."],
    ["ruff", "format", "--check", "."],
    ["mypy"],
    ["yamllint", "--strict", "."],
    ["ansible-lint", "roles", "playbooks"],
)


def _stage(argv: list[str]) -> None:
    """Run one step (argv, in the repository, tools from this virtualenv); stop the command if it fails."""
    import subprocess

    tool = Path(sys.executable).parent / argv[0]
    echo(f"lab: {' '.join(argv)}")
    done = subprocess.run([str(tool) if tool.exists() else argv[0], *argv[1:]], cwd=paths.ROOT)
    if done.returncode != 0:
        raise Exit(f"lab: {argv[0]} failed (exit {done.returncode})", code=done.returncode)


@task
def lint(c):
    """Run the linters and the type checker: ruff (lint, format), mypy, yamllint, ansible-lint."""
    for argv in LINTERS:
        _stage(argv)


@task(help={"args": "pytest arguments instead of the stages, e.g. '-k fio -x'"})
def test(c, args=""):
    """Lint, then the unit tests (stopping at the first failure), then integration and simulated-lab tests."""
    import shlex

    pytest = [sys.executable, "-m", "pytest"]
    if args:
        _stage([*pytest, *shlex.split(args)])
        return
    lint(c)
    # The unit tests over two pytest-xdist workers; then the integration and simulated-lab tests, each group one
    # after another on its worker (tests/conftest.py's groups; docs/DESIGN.md, "The test suite", says why).
    _stage([*pytest, "-n", "2", "-x", "--durations=15", "tests/unit"])  # the slowest tests, named in the log
    _stage([*pytest, "-n", "2", "--dist", "loadgroup", "--durations=25", "tests/integration", "tests/lab"])
