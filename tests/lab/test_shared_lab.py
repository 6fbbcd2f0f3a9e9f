"""Two labs' gpu01 on one machine share a file system: one campaign's teardown never touches the other's runs."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from iolab import sim
from iolab.shared.processes import alive
from support import ROOT, Cli, tmpfs_campaign

pytestmark = pytest.mark.lab

RUNS = Path("/opt/iolab/runs")
FIO = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "ramp": "0s", "size": "16MiB"}


def _start(cli: Cli, tmp_path: Path, name: str, inventory: Path, runtime: str) -> subprocess.Popen:
    path = tmpfs_campaign(tmp_path, name, [{**FIO, "runtime": runtime}])
    return subprocess.Popen(
        cli.argv("bench.all", "--inventory", str(inventory), "--hosts", "gpu01", "--campaign", str(path)),
        cwd=ROOT,
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _tool(before: set[Path], proc: subprocess.Popen) -> Path:
    """The PID file of the first gpu01 tool (any lab's) not in `before`, while `proc` runs."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        found = sorted(set(RUNS.glob("*/gpu01/*/hostrun.pid")) - before)
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no tool ran on gpu01: exit {proc.poll()}")


def test_an_interrupted_campaign_on_one_labs_gpu01_leaves_the_other_labs_gpu01_run_alone(
    sim_hosts, temporary_lab, tmp_path
):
    """The campaign to interrupt starts first and runs until it is interrupted; the other's fio starts after it, so
    that its runtime need only outlast the interrupted one's teardown (not also the other lab's provisioning)."""
    other = temporary_lab("o")
    started: list[subprocess.Popen] = []
    try:
        sim.up(1, other)
        before = set(RUNS.glob("*/gpu01/*/hostrun.pid"))
        long_cli, short_cli = Cli(tmp_path / "long"), Cli(tmp_path / "short")
        short_run = _start(short_cli, tmp_path, "shared-short", other.inventory, "5m")
        started.append(short_run)
        mine = _tool(before, short_run)
        long_run = _start(long_cli, tmp_path, "shared-long", sim_hosts.inventory, "20s")
        started.append(long_run)
        theirs = _tool(before | {mine}, long_run)
        their_tool = int(theirs.read_text())
        assert mine.parents[2] != theirs.parents[2]  # two commands, two run directories
        short_run.send_signal(signal.SIGINT)  # its teardown stops its tools, removes its files
        _, err = short_run.communicate(timeout=120)
        assert short_run.returncode == 130 and "interrupted: teardown done" in err, err
        assert not mine.parents[2].exists()
        assert theirs.exists() and alive(their_tool)  # the other lab's run goes on, untouched
        _, err = long_run.communicate(timeout=120)
        assert long_run.returncode == 0, err
        assert [r["status"] for r in long_cli.runs("shared-long")] == ["ok"]
        assert [s for s in long_cli.samples("shared-long") if s["metric"] == "read_bw"]
        assert not theirs.parents[2].exists()
    finally:
        for proc in started:  # should an assertion have stopped the test first: interrupted, torn down
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.communicate(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
        sim.down(other)
        shutil.rmtree(other.dir, ignore_errors=True)
