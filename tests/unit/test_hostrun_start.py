"""`hostrun run --start-when-told` (issue 26): one call per host does fio's prepare, says it is ready, and starts
the tool at the time the controller then writes to its stdin; without a start time the tool never starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from iolab.shared.protocol import READY_LINE
from support import ROOT


def _told(tmp_path, before: str, timeout: float = 60) -> subprocess.Popen:
    marker = tmp_path / "tool-ran"
    argv = [sys.executable, "-m", "iolab.host.hostrun", "run", "--dir", str(tmp_path / "run")]
    argv += ["--start-when-told", str(tmp_path / "run.start")]
    argv += ["--timeout", str(timeout), "--before", json.dumps([sys.executable, "-c", before]), "--"]
    argv += [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x')"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")}
    return subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_the_tool_starts_at_the_time_written_once_the_host_said_it_is_ready(tmp_path):
    proc = _told(tmp_path, "print('prepared')")
    assert proc.stdout and proc.stdin
    line = proc.stdout.readline().decode()
    assert line.startswith(READY_LINE)  # the prepare's own output is not passed on
    start_at = time.time() + 0.5
    proc.stdin.write(f"{start_at!r}\n".encode())
    proc.stdin.flush()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["start_at"] == start_at and 0 <= record["start_skew_s"] < 1.0  # on time
    assert record["called_at"] <= record["ready_at"] == float(line[len(READY_LINE) :]) <= record["told_at"] < start_at
    assert (tmp_path / "tool-ran").exists()


def test_the_start_may_come_as_the_start_files_time(tmp_path):
    """Through a ClusterShell gateway, which passes stdin to one command of a channel only: `touch -d @T`."""
    proc = _told(tmp_path, "pass")
    assert proc.stdout and proc.stdin
    assert proc.stdout.readline().decode().startswith(READY_LINE)
    proc.stdin.close()  # closed: the start may still come as the file
    proc.stdin = None
    start_at = round(time.time() + 0.5, 3)
    subprocess.run(["touch", "-d", f"@{start_at}", str(tmp_path / "run.start")], check=True)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert abs(record["start_at"] - start_at) < 1e-6 and 0 <= record["start_skew_s"] < 1.0


def test_without_a_start_time_the_tool_is_not_started(tmp_path):
    proc = _told(tmp_path, "pass", timeout=1)
    assert proc.stdout and proc.stdin
    assert proc.stdout.readline().decode().startswith(READY_LINE)
    proc.stdin.close()  # and no start file: the wait ends at the timeout (or when the session's process ends)
    proc.stdin = None
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "no start time came" in err.decode()
    assert not (tmp_path / "tool-ran").exists()


def test_a_failed_prepare_never_says_ready(tmp_path):
    proc = _told(tmp_path, "import sys; sys.exit('the job needs more room')")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and READY_LINE not in out.decode() and "the job needs more room" in err.decode()
    assert not (tmp_path / "tool-ran").exists()


@pytest.mark.parametrize(
    ("sent", "says"),
    [
        ("nan", "is not a time"),
        ("inf", "is not a time"),
        ("soon", "is not a time"),
        ("0", "s after it"),
        ("-5", "s after it"),
        ("{past}", "s after it"),  # an hour late: a host clock ahead of the controller's
        ("1e12", "ahead, past the run's 60 s"),
        ("{future}", "ahead, past the run's 60 s"),  # a stale start file's time, or a clock behind
    ],
)
def test_a_start_time_that_is_no_time_or_far_from_now_is_refused_and_the_tool_never_starts(tmp_path, sent, says):
    """Issue 37: a T in the past started the host alone at once with an unflagged skew of hours; inf or 1e12 was a
    traceback; a T far ahead was slept for past --timeout."""
    proc = _told(tmp_path, "pass", timeout=60)
    assert proc.stdout and proc.stdin
    assert proc.stdout.readline().decode().startswith(READY_LINE)
    line = sent.format(past=time.time() - 3600, future=time.time() + 3600)
    started = time.monotonic()
    out, err = proc.communicate(f"{line}\n".encode(), timeout=60)
    assert proc.returncode == 1 and time.monotonic() - started < 30  # refused at once, not slept for
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "the tool was not started" in lines[0], lines
    assert "Traceback" not in err.decode()
    assert not (tmp_path / "tool-ran").exists()


def test_a_start_a_few_seconds_late_starts_at_once_and_its_skew_is_recorded(tmp_path):
    """Later than the notice but well inside LATE (a slow dispatch): the host starts at once, the skew is kept."""
    proc = _told(tmp_path, "pass")
    assert proc.stdout and proc.stdin
    assert proc.stdout.readline().decode().startswith(READY_LINE)
    start_at = time.time() - 3
    _, err = proc.communicate(f"{start_at!r} gpu03\n".encode(), timeout=60)
    assert proc.returncode == 0, err
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["start_skew_s"] >= 3 and record["without"] == ["gpu03"]


def test_the_start_at_of_the_ansible_path_is_checked_too(tmp_path):
    argv = [sys.executable, "-m", "iolab.host.hostrun", "run", "--dir", str(tmp_path / "run"), "--start-at", "nan"]
    argv += ["--timeout", "60", "--", sys.executable, "-c", "pass"]
    done = subprocess.run(
        argv, env={**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        "the start time nan is not a time: the tool was not started"
    ]
