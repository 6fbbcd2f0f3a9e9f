"""A checkpoint whose ranks a host's memory cannot hold stops on every host before any rank writes (issue 23)."""

from __future__ import annotations

from support import mounted


def test_ranks_beyond_the_hosts_memory_stop_the_run_before_it_writes(cli, write_campaign, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    path = write_campaign(
        {
            "name": "itest-ckpt-memory",
            "backends": [{"name": "itest-ckpt-memory", "type": "local", "path": str(disk)}],
            # 60,000 ranks of 1.75 MB shards: about 17 MiB each, some 1 TiB on this one host
            "workloads": [{"name": "ckpt", "type": "checkpoint", "model": "llama3-8b", "ranks": 60000}],
        }
    )
    done = cli("bench.all", "--campaign", str(path), check=False)
    assert done.returncode != 0
    assert "60000 checkpoint ranks need" in done.stdout + done.stderr
    assert "give fewer writers or ranks, or spread them over more hosts" in done.stdout + done.stderr
    assert not any(disk.rglob("ckpt-rank*"))  # no rank started
    assert mounted("/mnt/iolab/itest-ckpt-memory") == []
