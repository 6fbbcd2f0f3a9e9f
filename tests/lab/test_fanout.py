"""Runs through ClusterShell (iolab.fanout) on simulated hosts: through a gateway, started together, named last."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from iolab.shared.processes import alive
from support import ROOT, Cli, tmpfs_campaign

pytestmark = pytest.mark.lab

RUNS = Path("/opt/iolab/runs")  # runs/<command>/<host>/<run>/ (one file system for every host)
FIO = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "ramp": "0s", "size": "8MiB"}


def test_a_run_through_a_clustershell_gateway_passes(sim_hosts, results, tmp_path):
    """gpu01 is the ClusterShell gateway to gpu[02-04] (a topology file whose root is this controller); the
    gateway runs ClusterShell on this checkout's python (the simulated hosts share its file system)."""
    topology = tmp_path / "topology.conf"
    root = socket.gethostname().split(".")[0]
    topology.write_text(f"[routes]\n{root}: gpu01\ngpu01: gpu[02-04]\n")
    inventory = yaml.safe_load(sim_hosts.inventory.read_text())
    group = inventory["all"]["children"]["gpu"]
    group["vars"].update({"iolab_topology": str(topology), "iolab_gateway_python": sys.executable})
    gated = tmp_path / "gated.yml"
    gated.write_text(yaml.safe_dump(inventory))
    cli = Cli(results)
    path = tmpfs_campaign(tmp_path, "lab-gateway", [FIO])
    cli("bench.all", "--inventory", str(gated), "--hosts", "gpu[02-04]", "--campaign", str(path))

    samples = [s for s in cli.samples("lab-gateway") if s["metric"] == "read_bw"]
    assert {s["host"] for s in samples} == {"gpu02", "gpu03", "gpu04", "*"}
    total = next(s for s in samples if s["host"] == "*")
    assert total["metadata"]["last_done"] in {"gpu02", "gpu03", "gpu04"}
    for sample in samples:
        if sample["host"] != "*":
            assert sample["metadata"]["start_skew_s"] is not None  # each host started on its own clock
            record = results / "lab-gateway" / "raw" / sample["run_id"] / sample["host"] / "run.json"
            assert json.loads(record.read_text())["launcher"] == "clustershell"
    assert sim_hosts.mounts_left() == {}


def test_ctrl_c_during_a_run_through_clustershell_leaves_no_tool_mount_or_lease(sim_hosts, results, tmp_path):
    """Ctrl-C ends every ssh session of the round; each host's hostrun then stops its fio, and teardown unmounts."""
    cli = Cli(results)
    path = tmpfs_campaign(tmp_path, "lab-fan-int", [{**FIO, "runtime": "5m"}])
    argv = cli.argv(
        "bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu[01-02]", "--campaign", str(path)
    )
    proc = subprocess.Popen(argv, cwd=ROOT, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        pidfiles: list[Path] = []
        while len(pidfiles) < 2 and time.monotonic() < deadline and proc.poll() is None:
            pidfiles = [p for name in ("gpu01", "gpu02") for p in RUNS.glob(f"*/{name}/*/hostrun.pid")]
            time.sleep(0.1)
        assert len(pidfiles) == 2, proc.communicate()
        tools = [int(p.read_text()) for p in pidfiles]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "interrupted: teardown done" in " ".join(err.split()), err
    assert not any(alive(pid) for pid in tools)
    assert sim_hosts.mounts_left() == {}
    assert not [p for p in Path("/opt/iolab/leases").glob("*.json") if "lab-fan-int" in p.read_text()]


def test_a_run_that_fails_on_the_hosts_is_recorded_as_the_playbooks_rescue_records_it(sim_hosts, results, tmp_path):
    """fio's prepare refuses a file larger than the target on both hosts: each host's run is failed with the task
    and the host's own line, its error.json beside its files, and nothing of the run stays on the hosts."""
    cli = Cli(results)
    path = tmpfs_campaign(tmp_path, "lab-fan-fail", [{**FIO, "size": "200MiB"}])
    args = ["bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu[01-02]", "--campaign", str(path)]
    done = cli(*args, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    runs = cli.runs("lab-fan-fail")
    assert sorted((r["host"], r["status"]) for r in runs) == [("gpu01", "failed"), ("gpu02", "failed")]
    for run in runs:
        assert run["error"].startswith("Size, write and lay out the job, then drop the caches: ")
        assert "the job needs 200 MiB but the target has" in run["error"]
        assert (results / "lab-fan-fail" / "raw" / run["run_id"] / run["host"] / "error.json").exists()
        assert not list(RUNS.glob(f"*/{run['host']}/{run['run_id']}*"))  # packed and gone, as the rescue leaves it
    assert cli.samples("lab-fan-fail") == []
    assert sim_hosts.mounts_left() == {}
