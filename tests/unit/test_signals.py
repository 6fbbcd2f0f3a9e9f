"""Signals are handled for the whole command, whatever the parent set, and the message says what happened."""

from __future__ import annotations

import hashlib
import os
import shutil
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
from iolab.run.cli import user_errors

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


def _started_as_lab_starts_it():
    """What `./lab` leaves a command started with SIGINT ignored: ignored, and blocked (see test_lab_blocks...)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _started_from_a_terminal():
    """SIGINT as a command started from a terminal has it: handled by default, not blocked."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_while_a_command_starts_with_sigint_ignored_is_not_lost(tmp_path):
    """A SIGINT in the first 0.3 s (Python's start, invoke, imports) was dropped: the command ran to its end, rc 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "invoke", "report.history"],
        cwd=ROOT,
        env={**os.environ, "IOLAB_RESULTS": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_started_as_lab_starts_it,
    )
    proc.send_signal(signal.SIGINT)  # at once: before any handler of iolab is in place
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert err.strip() == "iolab: interrupted before anything ran on a host; nothing to tear down"


def _lab_copy(tmp_path: Path) -> Path:
    """`lab` in a checkout of its own whose .venv is installed, its invoke saying the signals it was given."""
    (tmp_path / "pyproject.toml").write_text("")
    lab = tmp_path / "lab"
    shutil.copy(ROOT / "lab", lab)
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "invoke").write_text("#!/bin/bash\nexec grep -E '^Sig(Blk|Ign)' /proc/self/status\n")
    (venv / "invoke").chmod(0o755)
    stamp = hashlib.sha256((tmp_path / "pyproject.toml").read_bytes() + lab.read_bytes()).hexdigest()[:16]
    (tmp_path / ".venv" / ".iolab-installed-run").write_text(stamp + "\n")
    return lab


def _sigint_bits(text: str) -> dict[str, bool]:
    return {line.split(":")[0]: bool(int(line.split()[1], 16) & 2) for line in text.splitlines()}


def test_lab_blocks_sigint_for_a_command_started_with_it_ignored(tmp_path):
    lab = _lab_copy(tmp_path)
    ignored = subprocess.run(
        [str(lab), "report.history"],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert _sigint_bits(ignored.stdout) == {"SigBlk": True, "SigIgn": True}, ignored.stderr
    normal = subprocess.run(  # as a terminal starts it, whatever this test's own start left it (`nohup … &`)
        [str(lab), "report.history"],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_started_from_a_terminal,
    )
    assert _sigint_bits(normal.stdout) == {"SigBlk": False, "SigIgn": False}, normal.stderr
