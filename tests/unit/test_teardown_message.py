"""An interrupted command says "teardown done" only when its teardown found nothing of it left on the hosts."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A command (wrapped as every task is) that has run a playbook, and whose teardown found `sys.argv[2]`
# left on a host (none when empty), then waits for the signal.
CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from invoke.exceptions import Exit
from iolab.drive import execute, runner
from iolab.run.cli import user_errors

@user_errors
def command():
    runner.plays_started += 1
    execute.teardown_left.extend(line for line in sys.argv[2:] if line)
    print("ready", flush=True)
    time.sleep(30)

try:
    command()
except Exit as exc:
    print(exc.message, flush=True)
    sys.exit(exc.code)
"""


def _interrupted(*left: str) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ROOT / "pyfiles"), *left],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_clean_teardown_is_said_done():
    done = _interrupted("")
    assert done.returncode == 130, done.stderr
    assert "interrupted: teardown done, results gathered so far are kept" in done.stdout


def test_a_teardown_that_left_something_says_what_instead_of_done():
    done = _interrupted("unmounting itest failed: gpu02: itest-ssh left behind", "unmounting itest failed: gpu03: x")
    assert done.returncode == 130, done.stderr
    assert "teardown done" not in done.stdout
    assert (
        "interrupted: teardown incomplete: unmounting itest failed: gpu02: itest-ssh left behind (and 1 more); "
        "results gathered so far are kept"
    ) in done.stdout
