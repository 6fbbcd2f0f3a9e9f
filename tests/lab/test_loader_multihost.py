"""One data-parallel training job over two simulated hosts (torch.distributed with gloo over the bridge)."""

from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.lab
pytest.importorskip("torch", reason="loader workloads need torch (pip install torch==2.13.0)")


def test_one_job_spans_two_hosts_each_reading_its_shard(sim_hosts, cli, tmp_path):
    data = {
        "name": "lab-ddp",
        "backends": [{"name": "itest-ddp", "type": "tmpfs", "size": "160MiB"}],
        "dataset": {"kind": "imagenet-like", "files": 320, "seed": 4, "classes": 4},
        "workloads": [
            {
                "name": "ddp",
                "type": "pytorch",
                "reader": "packed",
                "workers": 1,
                "batch_size": 10,
                "decode": False,
                "accelerator": {"type": "custom", "compute_per_batch": "30ms"},
                "distributed": True,
            }
        ],
    }
    path = tmp_path / "ddp.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    cli("bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu01,gpu02", "--campaign", str(path))
    rates = {s["host"]: s for s in cli.samples("lab-ddp") if s["metric"] == "samples_per_s"}
    assert set(rates) == {"gpu01", "gpu02", "*"}
    ranks = {h: s["metadata"]["ranks"] for h, s in rates.items() if h != "*"}
    assert ranks["gpu01"][0]["rank"] == 0 and ranks["gpu02"][0]["rank"] == 1
    assert ranks["gpu01"][0]["batches"] == ranks["gpu02"][0]["batches"] == 16  # 320 samples / 2 ranks / 10
    # A barrier per step: the two hosts go at one pace (15 measured steps of ≥30 ms each, so the few
    # milliseconds by which the ranks' windows open apart stay well inside the tolerance).
    assert abs(rates["gpu01"]["value"] / rates["gpu02"]["value"] - 1) < 0.05
    for host in sim_hosts.hosts[:2]:
        assert sim_hosts.ssh(host, "findmnt -rn -o TARGET | grep ^/mnt/iolab || true").stdout.strip() == ""
