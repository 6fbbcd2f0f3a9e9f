"""`iolab.host.hostrun stop` ends and removes only its own command's runs (HOST_DIR/runs/OWNER/HOST)."""

from __future__ import annotations

import os
import subprocess
import time

from iolab.shared.processes import alive
from support import hostrun


def _left_running(runs_dir, name: str) -> subprocess.Popen:
    """A tool an interrupted run left: a process group of its own, its PID file in the run's directory."""
    run_dir = runs_dir / name
    run_dir.mkdir(parents=True)
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    (run_dir / "hostrun.pid").write_text(f"{proc.pid}\n")
    (run_dir / "stdout.txt").write_text("partial\n")
    return proc


def test_stop_ends_and_removes_its_own_runs_and_leaves_another_commands(tmp_path):
    runs = tmp_path / "runs"
    mine, theirs = runs / "ctl-100-1" / "gpu01", runs / "ctl-200-2" / "gpu01"  # two labs' gpu01, one file system
    mine_proc, theirs_proc = _left_running(mine, "run-a"), _left_running(theirs, "run-a")
    for owner in (mine.parent, theirs.parent):
        (owner / "run-a.start").touch()  # each run's start file, beside its hosts' directories (iolab.drive.fanout)
    try:
        done = hostrun("stop", "--dir", str(mine))
        assert done.returncode == 0, done.stderr
        assert f"stopped process group {mine_proc.pid} left by run-a" in done.stdout
        assert f"removed what 1 interrupted run(s) left in {mine}" in done.stdout
        assert mine_proc.wait(timeout=10) is not None
        assert not (runs / "ctl-100-1").exists()  # the command's directory goes with its last host
        assert theirs_proc.poll() is None  # the other command's tool still runs
        assert (theirs / "run-a" / "hostrun.pid").exists() and (theirs.parent / "run-a.start").exists()
    finally:
        for proc in (mine_proc, theirs_proc):
            proc.kill()
            proc.wait()


def test_stop_keeps_the_commands_directory_while_another_host_of_it_has_files(tmp_path):
    owner = tmp_path / "runs" / "ctl-100-1"
    (owner / "gpu02" / "run-b").mkdir(parents=True)  # simulated hosts share one file system
    (owner / "gpu01").mkdir()
    (owner / "run-b.start").touch()  # gpu02 may still wait for it
    done = hostrun("stop", "--dir", str(owner / "gpu01"))
    assert done.returncode == 0 and done.stdout == ""  # nothing to say: a clean teardown
    assert not (owner / "gpu01").exists() and (owner / "gpu02" / "run-b").exists()
    assert (owner / "run-b.start").exists()
    done = hostrun("stop", "--dir", str(owner / "gpu02"))  # the command's last host
    assert done.returncode == 0, done.stderr
    assert not owner.exists()


def test_stop_does_not_fail_when_another_host_removes_the_commands_directory_first(tmp_path, monkeypatch, capsys):
    """Simulated hosts stop at the same time on one file system: another host's stop may remove the command's
    directory just as this one reads what is left there (here: gpu02's, at the moment gpu01's lists it)."""
    import shutil

    from iolab.host import runstop as module

    owner = tmp_path / "runs" / "ctl-100-1"
    for host in ("gpu01", "gpu02"):
        (owner / host / "run-a").mkdir(parents=True)
    (owner / "run-a.start").touch()
    listings = {name: getattr(os, name) for name in ("scandir", "listdir")}

    def gpu02s_stop_first(name):
        def listing(path="."):
            if not isinstance(path, int) and os.fspath(path) == os.fspath(owner) and owner.exists():
                shutil.rmtree(owner / "gpu02")
                os.unlink(owner / "run-a.start")
                os.rmdir(owner)
            return listings[name](path)

        return listing

    for name in listings:
        monkeypatch.setattr(os, name, gpu02s_stop_first(name))
    assert module.stop(owner / "gpu01") == 0
    assert capsys.readouterr().err == ""
    assert not owner.exists()


def test_stop_on_a_command_that_left_nothing_says_nothing(tmp_path):
    started = time.monotonic()
    done = hostrun("stop", "--dir", str(tmp_path / "runs" / "ctl-1-1" / "gpu01"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert time.monotonic() - started < 10


def test_a_runs_own_teardown_keeps_an_archive_for_collect(tmp_path):
    """bench.fio runs and unmounts in one playbook: the archive too large for the run's output stays for collect."""
    mine = tmp_path / "runs" / "ctl-300-3" / "gpu01"
    (mine / "run-b").mkdir(parents=True)
    (mine / "run-b.tar.gz").write_bytes(b"archive")
    (mine / "run-c").mkdir()
    done = hostrun("stop", "--dir", str(mine), "--keep-archives")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["run-b.tar.gz"]
    done = hostrun("stop", "--dir", str(mine))  # a teardown after a failure: nothing is collected any more
    assert done.returncode == 0 and not mine.exists()


def test_stop_waits_for_the_call_whose_tool_it_ended_before_it_removes_the_commands_files(tmp_path):
    """A controller killed outright leaves `hostrun run` waiting on its tool: when `stop` ends the tool, that call
    still records and packs its run; `stop` removes the command's files only after it has, so none come back."""
    import os
    import sys

    from support import ROOT

    mine = tmp_path / "runs" / "ctl-400-4" / "gpu01"
    run_dir = mine / "run-a"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pyfiles"), "IOLAB_INLINE_MAX": "0"}  # packs to RUN.tar.gz
    argv = [sys.executable, "-m", "iolab.host.hostrun", "run", "--dir", str(run_dir), "--pack", "--", "sleep", "300"]
    with open(tmp_path / "out.txt", "wb") as out:
        wrapper = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not (run_dir / "hostrun.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        tool = int((run_dir / "hostrun.pid").read_text())
        done = hostrun("stop", "--dir", str(mine))
        assert done.returncode == 0, done.stderr
        assert f"stopped process group {tool} left by run-a" in done.stdout
        assert wrapper.poll() is not None  # it had recorded and packed its run, and ended
        assert not (tmp_path / "runs" / "ctl-400-4").exists(), sorted(map(str, mine.rglob("*")))
    finally:
        wrapper.kill()
        wrapper.wait()


def _fio_argv(tmp_path, runtime: int) -> list[str]:
    data = tmp_path / "data"
    data.write_bytes(b"\0" * (4 << 20))
    return ["fio", "--name=j", f"--filename={data}", "--rw=read", "--bs=4k", "--time_based", f"--runtime={runtime}"]


def _recorded(run_dir, timeout: float = 20) -> dict[str, int]:
    """The tool tree the run recorded (iolab.host.live), once fio's job process is in it."""
    import json

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            members = json.loads((run_dir / "tool.pids").read_text())
            if len(members) >= 2:
                return members
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"no tool tree recorded in {run_dir}")


def test_no_process_of_the_tool_outlives_stop_not_even_fios_jobs_in_sessions_of_their_own(tmp_path):
    """fio's job processes call setsid(): killing fio's process group leaves them reading the storage,
    which then cannot be unmounted ('target is busy'). stop ends every process of the tool's tree."""
    import os
    import sys

    from support import ROOT

    mine = tmp_path / "runs" / "ctl-500-5" / "gpu01"
    run_dir = mine / "run-a"
    argv = [sys.executable, "-m", "iolab.host.hostrun", "run", "--dir", str(run_dir), "--", *_fio_argv(tmp_path, 60)]
    wrapper = subprocess.Popen(argv, env={**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")})
    try:
        members = [int(pid) for pid in _recorded(run_dir)]
        assert len({os.getsid(pid) for pid in members}) >= 2  # fio's job runs in a session of its own
        done = hostrun("stop", "--dir", str(mine))
        assert done.returncode == 0, done.stderr
        assert not [pid for pid in members if alive(pid)]
    finally:
        wrapper.kill()
        wrapper.wait()


def test_stop_ends_a_process_the_tool_forked_after_its_tree_was_last_recorded(tmp_path):
    """A signal just after the tool started: it forked a job into a session of its own (as fio does) before the
    live thread recorded its tree, and the call was killed. The job is found by the mark hostrun puts in the tool's
    environment, and ended: left running, it held the tmpfs ('target is busy', a CI run's SIGTERM test)."""
    from iolab.shared.processes import TOOL_MARK

    mine = tmp_path / "runs" / "ctl-600-6" / "gpu01"
    run_dir = mine / "run-a"
    run_dir.mkdir(parents=True)
    job_pid = tmp_path / "job.pid"
    script = f'setsid sh -c "echo \\$\\$ > {job_pid}; exec sleep 300" & exec sleep 300'
    tool = subprocess.Popen(
        ["sh", "-c", script], start_new_session=True, env={**os.environ, TOOL_MARK: str(run_dir.resolve())}
    )
    (run_dir / "hostrun.pid").write_text(f"{tool.pid}\n")  # no tool.pids: nothing recorded the tree yet
    deadline = time.monotonic() + 10
    while not (job_pid.exists() and job_pid.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    job = int(job_pid.read_text())
    try:
        assert os.getsid(job) != os.getsid(tool.pid)  # out of the tool's group and session
        done = hostrun("stop", "--dir", str(mine))
        assert done.returncode == 0, done.stderr
        tool.wait(timeout=10)
        assert not alive(job)
    finally:
        tool.kill()
        tool.wait()
        if alive(job):
            os.kill(job, 9)
