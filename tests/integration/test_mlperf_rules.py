"""`mlperf: true` on a checkpoint workload, on this machine through the real playbooks: MLPerf Storage's 10 checkpoints
written (each fsynced) then 10 read, the caches dropped between, the read within 30 s; and a run breaking rules, flagged
with their numbers in its samples and in `./lab report` (table and --format mlperf).
"""

from __future__ import annotations

from pathlib import Path

from support import mounted

SCALE = 0.0001  # of llama3-8b's 105 GB: 10.5 MB a checkpoint, 1.3 MB for each of its 8 ranks; 105 MB for ten


def test_mlperf_rules_write_ten_drop_the_caches_and_read_ten_within_30_s(cli, write_campaign, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    path = write_campaign(
        {
            "name": "itest-mlperf-ckpt",
            "backends": [{"name": "itest-mlperf-disk", "type": "local", "path": str(disk)}],
            "workloads": [{"name": "ckpt", "type": "checkpoint", "scale": SCALE, "mlperf": True}],
        }
    )
    cli("bench.all", "--campaign", str(path))
    by = {(s["host"], s["metric"]): s for s in cli.samples("itest-mlperf-ckpt")}
    host = by[("localhost", "checkpoint_read_bw")]["metadata"]
    assert host["checkpoint_count"] == {"write": 10, "read": 10} and host["checkpoint_fsync"] is True
    assert host["cache_state"] == "dropped" and host["checkpoint_resident_before_read_bytes"] == 0  # a cold read
    assert 0 < host["checkpoint_read_gap_s"] < 30
    assert host["checkpoint"]["write"] == {"bytes": int(105e9 * SCALE) // 8 * 8, "ranks": 8}  # llama3-8b's 8
    # on this machine the local disk and the run's results share the root file system: rule 4.4.2, and no other
    validity = host["validity"]
    assert validity["flags"] == ["mlperf_filesystems"] and validity["valid"] is True
    assert validity["reasons"][0].startswith("MLPerf Storage rule 3.4.2/4.4.2")
    assert not any(Path(disk).rglob("ckpt-rank*")) and mounted("/mnt/iolab/itest-mlperf") == []


def test_a_run_breaking_mlperf_rules_is_flagged_with_their_numbers(cli, write_campaign):
    path = write_campaign(
        {
            "name": "itest-mlperf-broken",
            "mlperf": True,
            "backends": [{"name": "itest-mlperf-mem", "type": "tmpfs", "size": "256MiB"}],
            # 6 processes where llama3-8b has 8 (rule 4.6.1); tmpfs keeps the checkpoint in memory (4.3.1)
            "workloads": [{"name": "ckpt", "type": "checkpoint", "scale": SCALE, "ranks": 6}],
        }
    )
    cli("bench.all", "--campaign", str(path))
    by = {(s["host"], s["metric"]): s for s in cli.samples("itest-mlperf-broken")}
    host = by[("localhost", "checkpoint_read_bw")]["metadata"]
    assert host["checkpoint_count"] == {"write": 10, "read": 10}
    # the host's own: tmpfs cannot be read cold; it and the results' root differ (no 4.4.2), 6 ≥ 4 on it (no 4.6.2)
    assert host["validity"]["flags"] == ["mlperf_cache_cleared"] and host["validity"]["valid"] is True
    table = cli("report", "--campaign", "itest-mlperf-broken").stdout
    for said in ("4.3.1", "(checkpointDataSizeRatio):", "4.6.1", "(checkpointClosedMpiProcesses):"):
        assert said in table  # each flag's reason leads with its rule (the table may wrap between words)
    shaped = cli("report", "--campaign", "itest-mlperf-broken", "--format", "mlperf").stdout
    assert "| ckpt | itest-mlperf-mem | llama3-8b | 1 | 6 |" in shaped and "| 4.3.1, 4.6.1 |" in shaped
    assert mounted("/mnt/iolab/itest-mlperf") == []
