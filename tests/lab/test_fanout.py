"""Runs through ClusterShell (drive.fanout) on simulated hosts: through a gateway, started together, named last."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from iolab.drive import reach
from iolab.shared import trace
from iolab.shared.processes import alive
from support import ROOT, Cli, cmdline, tmpfs_campaign

pytestmark = pytest.mark.lab

RUNS = Path("/opt/iolab/runs")  # runs/<command>/<host>/<run>/ (one file system for every host)
FIO = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "ramp": "0s", "size": "8MiB"}


def test_a_run_through_a_clustershell_gateway_passes(sim_hosts, results, tmp_path):
    """gpu01 is the ClusterShell gateway to gpu[02-04] (a topology file whose root is this controller); the
    gateway runs ClusterShell on this checkout's python (the simulated hosts share its file system). A replay's
    trace goes through it in its prepare's argv (quotes, tabs and newlines as they are)."""
    topology = tmp_path / "topology.conf"
    root = socket.gethostname().split(".")[0]
    topology.write_text(f"[routes]\n{root}: gpu01\ngpu01: gpu[02-04]\n")
    inventory = yaml.safe_load(sim_hosts.inventory.read_text())
    group = inventory["all"]["children"]["gpu"]
    group["vars"].update({"iolab_topology": str(topology), "iolab_gateway_python": sys.executable})
    gated = tmp_path / "gated.yml"
    gated.write_text(yaml.safe_dump(inventory))
    cli = Cli(results)
    records = [(3, "read", 0, 0, 4096, 0, 5), (3, "read", 1, 4096, 4096, 10, 5), (4, "write", 1, 0, 512, 12, 5)]
    found = trace.load(trace.write(tmp_path, {"root": "/d", "files": [["it's", 8192], ["e/f", 8192]]}, records))
    replay = {"name": "rp", "type": "replay", "trace": str(found.path), "timing": "fast"}
    path = tmpfs_campaign(tmp_path, "lab-gateway", [FIO, replay])
    dry = cli("bench.all", "--inventory", str(gated), "--hosts", "gpu[02-04]", "--campaign", str(path), "--dry-run")
    assert (
        "runs of calibrate, checkpoint, dlio, fio, kvcache, metadata, mlperf_kvcache, objects, pytorch, replay, "
        f"tensorflow go through the ClusterShell gateways gpu01 (topology {topology})" in dry.stdout
    )
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
    replayed = [s for s in cli.samples("lab-gateway") if s["metric"] == "replay_s" and s["host"] != "*"]
    assert {s["host"] for s in replayed} == {"gpu02", "gpu03", "gpu04"}
    for sample in replayed:
        assert sample["metadata"]["replay_bytes"] == found.bytes
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


def test_a_host_never_ready_is_left_out_and_a_host_whose_hostrun_is_killed_is_torn_down(sim_hosts, results, tmp_path):
    """Issue 37, defects 1 and 3, on three hosts of one fan-out run:
    - gpu03 never becomes ready (its hostrun is stopped, SIGSTOP, as it starts: hung): once gpu01 and gpu02 have
      waited the bound (the inventory's iolab_ready_wait, 2 s here, rather than reach.READY_WAIT's 30 s), the run
      starts without it, and the hosts' records name it;
    - gpu02's hostrun is killed outright mid-run (kill -9, as the OOM killer does): ssh returns 255, which it also
      returns for a lost host; gpu02 answers a probe, so its run is failed as died, not unreachable, its fio (in a
      session of its own) is ended and its files packed;
    - the campaign's teardown ends gpu03's stopped hostrun (hostrun stop ends the command's noted calls), unmounts
      and cleans all three, and the leases are released: the next command finds nothing to clean."""
    inventory = yaml.safe_load(sim_hosts.inventory.read_text())
    inventory["all"]["children"]["gpu"]["vars"]["iolab_ready_wait"] = "2s"
    waiting = tmp_path / "waiting.yml"
    waiting.write_text(yaml.safe_dump(inventory))
    cli = Cli(results)
    path = tmpfs_campaign(tmp_path, "lab-silent", [{**FIO, "runtime": "10s"}])
    argv = cli.argv("bench.all", "--inventory", str(waiting), "--hosts", "gpu[01-03]", "--campaign", str(path))
    proc = subprocess.Popen(argv, cwd=ROOT, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped = []
    try:
        deadline = time.monotonic() + 240
        while not stopped and time.monotonic() < deadline and proc.poll() is None:
            for call in RUNS.glob("*/gpu03/.calls/[0-9]*"):
                if "iolab.host.hostrun run " in cmdline(int(call.name)):
                    os.kill(int(call.name), signal.SIGSTOP)
                    stopped.append(int(call.name))
            time.sleep(0.005)
        pidfile: list[Path] = []
        while stopped and not pidfile and time.monotonic() < deadline and proc.poll() is None:
            pidfile = list(RUNS.glob("*/gpu02/*/hostrun.pid"))  # gpu02's tool runs: the start was sent
            time.sleep(0.1)
        assert stopped and pidfile, proc.communicate()
        tool = int(pidfile[0].read_text())
        calls = pidfile[0].parents[1] / ".calls"
        (hostrun,) = [int(p.name) for p in calls.iterdir() if f"--dir {pidfile[0].parent}" in cmdline(int(p.name))]
        os.kill(hostrun, signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in stopped:  # should the teardown not have ended it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 1, out + err  # two hosts' runs failed
    runs = {r["host"]: r for r in cli.runs("lab-silent")}
    assert runs["gpu01"]["status"] == "ok"
    assert "the run started without it" in runs["gpu03"]["error"] and "not ready" in runs["gpu03"]["error"]
    assert "died there (killed by a signal" in runs["gpu02"]["error"] and "unreachable" not in runs["gpu02"]["error"]
    start = next(s for s in cli.samples("lab-silent") if s["host"] == "gpu01")["metadata"]["start"]
    assert start["without"] == ["gpu03"] and start["waited_for"] in {"gpu01", "gpu02"}
    # The inventory's bound, not reach.READY_WAIT's: the others were not kept waiting 30 s for gpu03.
    waited = float(runs["gpu03"]["error"].split("not ready ")[1].split(" s after")[0])
    assert waited < reach.READY_WAIT / 2, runs["gpu03"]["error"]
    assert not alive(tool) and not any(alive(pid) for pid in stopped)  # fio outlived its hostrun: ended too
    assert not list(RUNS.glob("*/gpu0[1-3]/*"))  # nothing of the run stays on a host
    assert sim_hosts.mounts_left() == {}
    assert not [p for p in Path("/opt/iolab/leases").glob("*.json") if "lab-silent" in p.read_text()]
