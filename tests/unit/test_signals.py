"""Signals are handled for the whole command, whatever the parent set, and the message says what happened."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A command (wrapped as every task is) that waits; started with SIGINT ignored, as `nohup`, a
# scheduler or a script's background job (`cmd &` in a non-interactive shell) start theirs.
CHILD = """
import signal, sys, time
sys.path.insert(0, sys.argv[1])
from invoke.exceptions import Exit
from iolab.cli import user_errors

@user_errors
def command():
    print("ready", flush=True)
    time.sleep(30)

try:
    command()
except Exit as exc:
    print(exc.message, flush=True)
    sys.exit(exc.code)
"""


def _interrupt(sig: int) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ROOT / "pyfiles")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_interrupts_a_command_whose_parent_ignored_it():
    done = _interrupt(signal.SIGINT)
    assert done.returncode == 130, done.stderr
    assert "interrupted before anything ran on a host; nothing to tear down" in done.stdout


def test_sigterm_before_any_playbook_does_not_claim_a_teardown():
    """A SIGTERM during a dry run printed "teardown done"."""
    done = _interrupt(signal.SIGTERM)
    assert done.returncode == 143, done.stderr
    assert "terminated (SIGTERM) before anything ran on a host" in done.stdout
    assert "teardown done" not in done.stdout
