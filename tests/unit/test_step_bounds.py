"""Every step a run starts on a host ends at the run's timeout with its whole process tree (issue 23):
fio's prepare on several hosts (`hostrun step`, roles/bench_fio/tasks/prepare.yml), its prepare on one host
(`hostrun run --before`), a cache drop and the checkpoint's check (`hostrun step`)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from iolab.shared.processes import alive
from support import hostrun

# A step whose tree hangs: it starts a child in a session of its own (as fio's job processes do), writes
# both PIDs to PIDS, then waits for ever, as a process blocked on storage that never answers.
HANG = """
import os, sys, time
child = os.fork()
if child == 0:
    os.setsid()
    time.sleep(600)
    os._exit(0)
open(sys.argv[1], "w").write(f"{os.getpid()} {child}")
time.sleep(600)
"""


def _tree(pids_file) -> list[int]:
    return [int(pid) for pid in pids_file.read_text().split()]


def _end(pids_file) -> None:
    """Clean up after a failing test: the hung tree it started, by its PIDs."""
    for pid in _tree(pids_file) if pids_file.exists() else []:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def _hung_fio(tmp_path) -> dict[str, str]:
    """An environment whose `fio` hangs in its tree (a stand-in for fio laying out on storage that blocks:
    the unit tests have no storage that hangs; tests/lab/test_faults.py freezes a real sshfs)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fio = bin_dir / "fio"
    fio.write_text(f"#!{sys.executable}\nimport sys\nsys.argv[1:] = [{str(tmp_path / 'pids')!r}]\n{HANG}")
    fio.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _prepare_argv(tmp_path) -> list[str]:
    return [
        sys.executable, "-m", "iolab.kinds.fio.host", "prepare", "--dir", str(tmp_path / "run"),
        "--workdir", str(tmp_path / "target"), "--options", json.dumps({"rw": "read", "bs": "4k"}),
        "--size", str(1 << 20),
    ]  # fmt: skip


def test_fios_prepare_that_hangs_ends_at_the_runs_timeout_with_its_tree(tmp_path):
    env, pids_file = _hung_fio(tmp_path), tmp_path / "pids"
    try:
        started = time.monotonic()
        done = hostrun("step", "--timeout", "2", "--", *_prepare_argv(tmp_path), env=env)
        took = time.monotonic() - started
        pids = _tree(tmp_path / "pids")
        assert done.returncode == 1
        assert done.stderr.strip().splitlines()[-1] == (
            "iolab.kinds.fio.host prepare stopped: it ran past its timeout of 2 s"
        )
        assert took < 2 + 15, took  # the timeout, SIGTERM's grace and no more
        assert not [pid for pid in pids if alive(pid)]  # its setsid()'d child too
    finally:
        _end(pids_file)


def test_a_before_step_that_hangs_ends_at_the_runs_timeout_and_the_tool_never_starts(tmp_path):
    pids_file = tmp_path / "pids"
    run_dir = tmp_path / "runs" / "ctl-1-1" / "gpu01" / "run-a"
    before = json.dumps([sys.executable, "-c", HANG, str(pids_file)])
    try:
        started = time.monotonic()
        done = hostrun(
            "run", "--dir", str(run_dir), "--timeout", "2", "--before", before, "--no-pack",
            "--", "touch", str(tmp_path / "tool-ran"),
        )  # fmt: skip
        took = time.monotonic() - started
        pids = _tree(pids_file)
        assert done.returncode == 1
        assert done.stderr.strip().splitlines()[-1] == "python3 stopped: it ran past its timeout of 2 s".replace(
            "python3", os.path.basename(sys.executable)
        )
        assert took < 2 + 15, took
        assert not [pid for pid in pids if alive(pid)]
        assert not (tmp_path / "tool-ran").exists()
    finally:
        _end(pids_file)


def test_a_step_that_ends_in_time_passes_its_output_and_status_on(tmp_path):
    code = "import sys; print('{\"started_at\": 1}'); print('warned', file=sys.stderr); sys.exit(3)"
    done = hostrun("step", "--timeout", "30", "--", sys.executable, "-c", code)
    assert (done.returncode, done.stdout, done.stderr) == (3, '{"started_at": 1}\n', "warned\n")


@pytest.mark.parametrize("timeout", ["-1", "nan", "inf", "soon"])
def test_a_timeout_that_is_no_number_of_seconds_is_refused(timeout):
    """Issue 37: `hostrun step --timeout` took -1, nan and inf."""
    done = hostrun("step", "--timeout", timeout, "--", "true")
    assert done.returncode == 2 and f"argument --timeout: '{timeout}' is not a number of seconds ≥ 0" in done.stderr


def test_a_fraction_of_a_second_is_said_as_it_is_and_a_missing_program_is_one_line():
    """Issue 37: a 0.5 s timeout was reported as "0 s"; a missing program was a traceback."""
    done = hostrun("step", "--timeout", "0.5", "--", "sleep", "5")
    assert done.returncode == 1 and done.stderr.strip() == "sleep stopped: it ran past its timeout of 0.5 s"
    done = hostrun("step", "--timeout", "5", "--", "/no/such/program")
    assert done.returncode == 127
    assert done.stderr.strip() == "program could not start: No such file or directory (/no/such/program)"
