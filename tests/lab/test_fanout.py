"""Runs through ClusterShell (iolab.fanout) on simulated hosts: through a gateway, started together, named last."""

from __future__ import annotations

import json
import socket
import sys

import pytest
import yaml

from support import Cli, tmpfs_campaign

pytestmark = pytest.mark.lab

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
