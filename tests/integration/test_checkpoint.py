"""Checkpointing (MLPerf Storage's workload) on localhost: real processes writing, fsyncing and reading real shards.

tmpfs cannot be read cold (its pages are the storage): the test checks that the record
says so, and that on a local disk the read after the drop starts with none of the
checkpoint in the page cache.
"""

from __future__ import annotations

from pathlib import Path

from support import mounted

SCALE = 0.0005  # of llama3-8b's 105 GB: 52.5 MB


def test_checkpoint_writes_fsyncs_drops_and_reads_back(cli, write_campaign, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    path = write_campaign(
        {
            "name": "itest-ckpt",
            "repetitions": 1,
            "backends": [
                {"name": "itest-ckpt-mem", "type": "tmpfs", "size": "128MiB"},
                {"name": "itest-ckpt-disk", "type": "local", "path": str(disk)},
            ],
            "workloads": [{"name": "ckpt", "type": "checkpoint", "model": "llama3-8b", "scale": SCALE, "writers": 2}],
        }
    )
    dry = cli("bench.all", "--campaign", str(path), "--dry-run").stdout
    assert "checkpoint of llama3-8b at scale 0.0005 (52.5 MB of 105 GB" in dry
    cli("bench.all", "--campaign", str(path))
    samples = cli.samples("itest-ckpt")
    by = {(s["backend"], s["host"], s["metric"]): s for s in samples}
    for backend in ("itest-ckpt-mem", "itest-ckpt-disk"):
        for phase in ("write", "read"):
            bw, seconds = by[(backend, "*", f"checkpoint_{phase}_bw")], by[(backend, "*", f"checkpoint_{phase}_s")]
            assert bw["unit"] == "B/s" and seconds["unit"] == "s"
            moved = bw["metadata"]["checkpoint"][phase]
            assert moved == {"bytes": int(105e9 * SCALE) // 2 * 2, "ranks": 2}
            assert abs(bw["value"] * seconds["value"] - moved["bytes"]) < 1  # bytes / the slowest rank
        host = by[(backend, "localhost", "checkpoint_read_bw")]["metadata"]
        assert host["checkpoint_fsync"] is True and host["cache_state"] == "dropped"
    disk_meta = by[("itest-ckpt-disk", "localhost", "checkpoint_read_bw")]["metadata"]
    assert disk_meta["checkpoint_resident_before_read_bytes"] == 0 and disk_meta["checkpoint_read_cold"] is True
    mem_meta = by[("itest-ckpt-mem", "localhost", "checkpoint_read_bw")]["metadata"]
    assert mem_meta["checkpoint_read_cold"] is False  # tmpfs: the data lives in memory
    assert mounted("/mnt/iolab/itest-ckpt") == []
    assert not any(Path(disk).rglob("ckpt-rank*"))  # the shards are removed after the read
    table = cli("report", "--campaign", "itest-ckpt").stdout
    assert "checkpoint_write_bw" in table and "checkpoint_read_bw" in table
