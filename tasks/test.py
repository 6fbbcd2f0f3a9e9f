"""./lab test and ./lab lint."""

from __future__ import annotations

import sys
from pathlib import Path

from invoke.exceptions import Exit

from iolab import paths
from iolab.cli import echo

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


def _stage(argv: list[str], env: dict[str, str] | None = None) -> None:
    """Run one step (argv, in the repository, tools from this virtualenv, `env` added to the environment); stop
    the command if it fails."""
    import os
    import subprocess

    tool = Path(sys.executable).parent / argv[0]
    echo(f"lab: {' '.join(argv)}")
    environ = {**os.environ, **(env or {})}
    done = subprocess.run([str(tool) if tool.exists() else argv[0], *argv[1:]], cwd=paths.ROOT, env=environ)
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
    # Two pytest-xdist workers: the unit tests spread over both; then the integration tests (this machine) on one
    # and the simulated-lab tests on the other (tests/conftest.py's groups), beside each other.
    workers = ["-n", str(WORKERS)]
    _stage([*pytest, *workers, "-x", "--durations=15", "tests/unit"])  # the slowest tests, named in the log
    _provision()
    _stage([*pytest, *workers, "--dist", "loadscope", "--durations=25", "tests/integration", "tests/lab"])


WORKERS = 2


def _provision() -> None:
    """This machine's iolab and deep-learning stack, installed before the two groups start: the simulated hosts
    share its root, and so /opt/iolab, which two first provisionings at once would unpack and install into
    together (its results, the provenance, go to a directory that is removed after)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="iolab-provision-") as results:
        _stage([sys.executable, "-m", "invoke", "lab.setup", "--dl"], env={"IOLAB_RESULTS": results})
