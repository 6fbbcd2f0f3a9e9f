"""./lab test and ./lab lint."""

from __future__ import annotations

import sys
from pathlib import Path

from invoke.exceptions import Exit

from iolab import paths
from iolab.run.cli import echo

from .common import task

# --- test --------------------------------------------------------------------------------

# The first CI stage: fast, and failing before the slow integration tests start. The linters run beside each other
# (ansible-lint ≈ 43 s and mypy ≈ 30 s of one core each: docs/PERFORMANCE.md, "The project's own CI").
LINTERS = (
    ["ansible-lint", "roles", "playbooks"],
    ["mypy"],
    ["ruff", "check", "."],
    ["ruff", "format", "--check", "."],
    ["yamllint", "--strict", "."],
)


def _tool(argv: list[str]) -> list[str]:
    """argv with its program from this virtualenv where it has one."""
    tool = Path(sys.executable).parent / argv[0]
    return [str(tool) if tool.exists() else argv[0], *argv[1:]]


def _stage(argv: list[str]) -> None:
    """Run one step (argv, in the repository, tools from this virtualenv); stop the command if it fails. Its wall
    time ends it in the log: a CI run's stages, each timed (docs/PERFORMANCE.md, "The project's own CI")."""
    import subprocess
    import time

    echo(f"lab: {' '.join(argv)}")
    started = time.monotonic()
    done = subprocess.run(_tool(argv), cwd=paths.ROOT)
    took = f"after {time.monotonic() - started:.0f} s"
    if done.returncode != 0:
        raise Exit(f"lab: {argv[0]} failed (exit {done.returncode}) {took}", code=done.returncode)
    echo(f"lab: done {took}")


def _steps_together(steps: tuple[list[str], ...]) -> None:
    """Run the steps at once; then each one's output, in their order; stop the command if any failed (the first
    failure's exit status)."""
    import subprocess
    import tempfile
    import time

    with tempfile.TemporaryDirectory(prefix="iolab-lint-") as tmp:
        logs = [Path(tmp, str(i)) for i in range(len(steps))]
        started = time.monotonic()
        procs = []
        for argv, log in zip(steps, logs, strict=True):
            with log.open("wb") as out:
                procs.append(subprocess.Popen(_tool(argv), cwd=paths.ROOT, stdout=out, stderr=subprocess.STDOUT))
        failed = []
        for argv, proc, log in zip(steps, procs, logs, strict=True):
            code = proc.wait()
            echo(f"lab: {' '.join(argv)}")
            sys.stdout.write(log.read_text(errors="replace"))
            if code != 0:
                failed.append((" ".join(argv), code))
    sys.stdout.flush()
    took = f"after {time.monotonic() - started:.0f} s"
    if failed:
        said = ", ".join(f"{name} (exit {code})" for name, code in failed)
        raise Exit(f"lab: {said} failed {took}", code=failed[0][1])
    echo(f"lab: done {took}")


@task
def lint(c):
    """Run the linters and the type checker beside each other: ruff (lint, format), mypy, yamllint, ansible-lint."""
    _steps_together(LINTERS)


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
    # Each test's worker and end ("[gw1] PASSED"), and every duration over 5 s: the two workers' timelines, from
    # which the stage's critical path is read (docs/PERFORMANCE.md, "The project's own CI").
    last = ["-n", "2", "--dist", "loadgroup", "-v", "--durations=0", "--durations-min=5"]
    _stage([*pytest, *last, "tests/integration", "tests/lab"])
