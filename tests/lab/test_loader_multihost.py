"""One data-parallel training job over two simulated hosts: DDP with gloo over the bridge, real gradients."""

from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.lab
pytest.importorskip("torch", reason="loader workloads need torch (pip install torch==2.13.0)")


def test_one_ddp_job_spans_two_hosts_each_reading_its_shard(sim_hosts, cli, tmp_path):
    data = {
        "name": "lab-ddp",
        "backends": [{"name": "itest-ddp", "type": "tmpfs", "size": "64MiB"}],
        "dataset": {"kind": "imagenet-like", "files": 32, "seed": 4, "classes": 4},
        "workloads": [
            {
                "name": "ddp",
                "type": "pytorch",
                "reader": "packed",
                "workers": 1,
                "batch_size": 4,
                "steps": 3,
                # ResNet-50 (tiny: a CPU's) trained for real on each host's CPU, one job over both: the gloo
                # all-reduce of its gradients is the step's barrier. The real data only: kept short.
                "accelerator": {"type": "cpu", "scale": "tiny"},
                "data": "real",
                "distributed": True,
            }
        ],
    }
    path = tmp_path / "ddp.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    cli("bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu01,gpu02", "--campaign", str(path))
    rates = {s["host"]: s for s in cli.samples("lab-ddp") if s["metric"] == "samples_per_s"}
    assert set(rates) == {"gpu01", "gpu02", "*"}
    meta = {h: s["metadata"] for h, s in rates.items() if h != "*"}
    assert meta["gpu01"]["ranks"][0]["rank"] == 0 and meta["gpu02"]["ranks"][0]["rank"] == 1
    assert meta["gpu01"]["ranks"][0]["batches"] == meta["gpu02"]["ranks"][0]["batches"] == 3
    # Each host read its own shard, yet both end with the same model: DDP all-reduced the gradients every step.
    assert meta["gpu01"]["training"]["world"] == 2
    assert meta["gpu01"]["training"]["checksums"] == meta["gpu02"]["training"]["checksums"]
    assert rates["gpu01"]["params"]["gpus"] == 1 and rates["gpu01"]["params"]["data"] == "real"
    for host in sim_hosts.hosts[:2]:
        assert sim_hosts.ssh(host, "findmnt -rn -o TARGET | grep ^/mnt/iolab || true").stdout.strip() == ""
