"""A loader's runs through ClusterShell (drive.fanout, its host call: iolab.kinds.hostcall) on a simulated host:
its hostrun killed mid-run, its connection cut mid-run. Each is torn down and recorded as failed, and leaves nothing
for the next command to clean (no tool, no run files, no mount, no lease)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from iolab.shared.processes import alive
from support import ROOT, Cli, cmdline, tmpfs_campaign

pytestmark = pytest.mark.lab
pytest.importorskip("torch", reason="loader workloads need torch (pip install torch==2.13.0)")

RUNS = Path("/opt/iolab/runs")  # runs/<command>/<host>/<run>/ (one file system for every host)
# A loader that runs for minutes unless stopped: 0.05 s slept per sample, 200 epochs of 16 files.
SLOW = {"name": "slow", "type": "pytorch", "reader": "packed", "workers": 0, "batch_size": 4}
FIO = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "ramp": "0s", "size": "8MiB"}
SLOW |= {"epochs": 200, "preprocess_time": 0.05, "decode": False, "timeout": "10m"}


def campaign(tmp_path: Path, name: str) -> Path:
    data = {
        "name": name,
        "backends": [{"name": f"itest-{name}", "type": "tmpfs", "size": "32MiB"}],
        "dataset": {"kind": "imagenet-like", "files": 16, "seed": 3, "classes": 2},
        "workloads": [SLOW],
    }
    path = tmp_path / f"{name}.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def parents(pid: int) -> list[int]:
    """The process's ancestors, nearest first."""
    chain = []
    while pid > 1:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            break
        pid = int(fields[1])
        chain.append(pid)
    return chain


def interrupted(sim_hosts, results: Path, tmp_path: Path, name: str, host: str, strike) -> tuple[dict, Cli]:
    """Run the slow loader's campaign on `host`; once its loader runs, `strike(hostrun's pid)`; return the host's
    run record and the loader's pid."""
    cli = Cli(results)
    argv = cli.argv(
        "bench.all",
        "--inventory",
        str(sim_hosts.inventory),
        "--hosts",
        host,
        "--campaign",
        str(campaign(tmp_path, name)),
    )
    proc = subprocess.Popen(argv, cwd=ROOT, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        pidfile: list[Path] = []
        while not pidfile and time.monotonic() < deadline and proc.poll() is None:
            pidfile = list(RUNS.glob(f"*/{host}/*/hostrun.pid"))  # the loader runs: the start was sent
            time.sleep(0.1)
        assert pidfile, proc.communicate()
        tool = int(pidfile[0].read_text())
        calls = pidfile[0].parents[1] / ".calls"
        (hostrun,) = [int(p.name) for p in calls.iterdir() if f"--dir {pidfile[0].parent}" in cmdline(int(p.name))]
        assert "--start-when-told" in cmdline(hostrun) and "iolab.host.prepare" in cmdline(hostrun)  # the fan-out's
        strike(hostrun)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1 and "Traceback" not in err, out + err
    (run,) = cli.runs(name)
    assert run["status"] == "failed" and run["host"] == host
    assert not alive(tool)  # the loader (in a session of its own) did not outlive its hostrun
    assert not list(RUNS.glob(f"*/{host}/*"))  # nothing of the run stays on the host
    assert sim_hosts.mounts_left() == {}
    return run, cli


def leases(name: str) -> list[str]:
    return [p.read_text() for p in Path("/opt/iolab/leases").glob("*.json") if name in p.read_text()]


def test_a_loader_whose_hostrun_is_killed_mid_run_is_torn_down_and_recorded_as_died(sim_hosts, results, tmp_path):
    """kill -9 of the loader's hostrun (as the OOM killer does): ssh returns 255, the host answers a probe, so the
    run is failed as died there, not as a lost host."""
    run, _ = interrupted(sim_hosts, results, tmp_path, "lab-loader-kill", "gpu03", lambda pid: os.kill(pid, 9))
    assert "died there (killed by a signal" in run["error"] and "unreachable" not in run["error"], run["error"]
    assert not leases("lab-loader-kill")  # released: the next command finds nothing to clean


def test_a_loader_whose_connection_is_cut_mid_run_is_torn_down_and_recorded_as_failed(sim_hosts, results, tmp_path):
    """The sshd that serves the loader's session is killed: the controller's ssh loses its connection (every session
    over it, the lease's too), the host's hostrun loses its session and stops the loader; the run is failed, its
    record kept. The lease, whose session went with the connection, is left for the next command, which finds
    nothing of the run to clean."""

    def cut(hostrun: int) -> None:
        sshd = next(pid for pid in parents(hostrun) if cmdline(pid).startswith("sshd"))
        os.kill(sshd, signal.SIGKILL)

    run, cli = interrupted(sim_hosts, results, tmp_path, "lab-loader-cut", "gpu04", cut)
    assert run["error"], run
    raw = results / "lab-loader-cut" / "raw" / run["run_id"] / "gpu04"
    assert json.loads((raw / "error.json").read_text())["task"] == "Run the loader"
    left = leases("lab-loader-cut")
    path = tmpfs_campaign(tmp_path, "lab-loader-next", [FIO])
    nxt = cli("bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu04", "--campaign", str(path))
    said = " ".join(nxt.stderr.split())
    assert not left or "nothing of it was left" in said, said
    assert "cleaned what it left" not in said and not leases("lab-loader-cut") and not leases("lab-loader-next")
