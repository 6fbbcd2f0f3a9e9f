"""The checkpoint workload's contract: schema, the host program's record, and MLPerf's duration and throughput."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from iolab.campaign import model as campaign
from iolab.errors import UserError
from iolab.kinds.checkpoint import host as checkpoint
from iolab.kinds.checkpoint import parser
from iolab.measures.samples import Sample
from iolab.store import record

ROOT = Path(__file__).resolve().parents[2]


def load(tmp_path: Path, backend: dict, **workload) -> campaign.Campaign:
    path = tmp_path / "c.yml"
    path.write_text(
        yaml.safe_dump(
            {"name": "ck", "backends": [backend], "workloads": [{"name": "ck", "type": "checkpoint", **workload}]}
        )
    )
    return campaign.load(path)


def test_the_model_sets_the_size_and_the_scale_shrinks_it(tmp_path):
    spec = load(tmp_path, {"name": "m", "type": "tmpfs", "size": "1GiB"}, model="llama3-70b", scale=0.001, writers=4)
    workload = spec.workloads[0]
    assert workload.bytes == 912_000_000
    assert workload.role_vars("/mnt/iolab/m") == {
        "bench_checkpoint_target": "/mnt/iolab/m",
        "bench_checkpoint_bytes": 912_000_000,
        "bench_checkpoint_writers": 4,
        "bench_checkpoint_ranks": 0,
        "bench_checkpoint_count": 1,
        "bench_checkpoint_timeout": 1800.0,
    }


@pytest.mark.parametrize(
    "backend, workload, says",
    [
        (
            {"name": "ro", "type": "mount", "source": "nas:/x", "fstype": "nfs", "readonly": True},
            {},
            "writes (checkpoint llama3-8b) but backend ro is mounted read-only",
        ),
        ({"name": "m", "type": "tmpfs", "size": "1GiB"}, {"scale": 1e-9}, "less than 1 MiB for each of the 8 writers"),
        ({"name": "m", "type": "tmpfs", "size": "1GiB"}, {"model": "gpt-5"}, "Input should be 'llama3-8b'"),
        ({"name": "m", "type": "tmpfs", "size": "1GiB"}, {"scale": 2}, "less than or equal to 1"),
        # issue 23: a bool is not a count; a tmpfs smaller than the checkpoint is refused at load, not on the host
        ({"name": "m", "type": "tmpfs", "size": "1GiB"}, {"writers": True}, "writers: Input should be a valid integer"),
        ({"name": "m", "type": "tmpfs", "size": "1GiB"}, {"ranks": True}, "ranks: Input should be a valid integer"),
        (
            {"name": "m", "type": "tmpfs", "size": "64MiB"},
            {"scale": 0.001},
            "workload ck: its checkpoint (105 MB) does not fit tmpfs backend m (64 MiB)",
        ),
        ({"name": "m", "type": "tmpfs", "size": "1GiB"}, {"writers": 2, "ranks": 8}, "writers (per host) or ranks"),
        # issue 37: the whole checkpoint read "1.05e+05 MB"
        (
            {"name": "m", "type": "tmpfs", "size": "64MiB"},
            {"scale": 1},
            "workload ck: its checkpoint (105 GB) does not fit tmpfs backend m (64 MiB)",
        ),
    ],
)
def test_what_a_checkpoint_campaign_refuses(tmp_path, backend, workload, says):
    with pytest.raises(UserError, match=says.replace("(", r"\(").replace(")", r"\)")):
        load(tmp_path, backend, **workload)


def test_the_host_program_writes_fsyncs_and_reads_every_rank(tmp_path):
    work, out = tmp_path / "work", tmp_path / "run"
    common = [
        sys.executable,
        "-m",
        "iolab.kinds.checkpoint.host",
        "--dir",
        str(work),
        "--out",
        str(out),
        "--world",
        "9",
        "--hosts",
        "3",
        "--index",
        "2",
    ]
    env = {"PYTHONPATH": str(ROOT / "pyfiles")}
    subprocess.run([*common[:3], "write", *common[3:], "--bytes-per-rank", str(3 << 20)], check=True, env=env)
    shards = sorted(work.iterdir())
    assert [p.name for p in shards] == ["ckpt-rank00006-01.bin", "ckpt-rank00007-01.bin", "ckpt-rank00008-01.bin"]
    assert shards[0].read_bytes()[:4096] != shards[1].read_bytes()[:4096]  # no two shards alike
    subprocess.run([*common[:3], "read", *common[3:], "--remove"], check=True, env=env)
    assert not any(work.iterdir())
    record = json.loads((out / "checkpoint.json").read_text())
    assert [r["rank"] for r in record["read"]["ranks"]] == [6, 7, 8]
    assert all(r["bytes"] == 3 << 20 for phase in ("write", "read") for r in record[phase]["ranks"])
    parsed = parser.parse(out)
    assert {m.metric for m in parsed.measurements} == {
        "checkpoint_write_bw",
        "checkpoint_write_s",
        "checkpoint_read_bw",
        "checkpoint_read_s",
    }
    assert parsed.metadata["checkpoint"]["write"] == {"bytes": 9 << 20, "ranks": 3}


def test_the_aggregate_is_every_hosts_bytes_over_the_slowest_rank_of_all():
    """MLPerf: duration is the slowest rank's; throughput the bytes over that duration (not a sum of rates)."""

    def host(name: str, seconds: float, size: int) -> tuple[list[Sample], dict]:
        meta = {"checkpoint": {"write": {"bytes": size, "ranks": 4}}}
        make = dict(
            campaign="c",
            run_id="r",
            repetition=1,
            host=name,
            backend="b",
            workload="w",
            started_at="t0",
            ended_at="t1",
            metadata=meta,
        )
        return [
            Sample(metric="checkpoint_write_s", value=seconds, unit="s", **make),
            Sample(metric="checkpoint_write_bw", value=size / seconds, unit="B/s", **make),
        ], {}

    out = {s.metric: s for s in record.aggregate({"h1": host("h1", 2.0, 400), "h2": host("h2", 8.0, 400)})}
    assert out["checkpoint_write_s"].value == 8.0
    assert out["checkpoint_write_bw"].value == 100.0  # 800 B / 8 s, not 200 + 50
    assert out["checkpoint_write_bw"].metadata["checkpoint"]["write"] == {"bytes": 800, "ranks": 8}


# --- issue 23: the ranks spread over the hosts, and each host's memory checked before any starts ---------------


def test_mlperfs_process_count_is_spread_over_the_hosts():
    """llama3-1t's 1,024 processes are the whole job's: on 3 hosts 342, 341 and 341, numbered once over the job."""
    shares = [checkpoint.share(1024, 3, index) for index in range(3)]
    assert [len(s) for s in shares] == [342, 341, 341]
    assert [rank for s in shares for rank in s] == list(range(1024))
    assert checkpoint.share(9, 3, 2) == range(6, 9)  # writers per host: 3 on each of 3 hosts


def test_a_rank_holds_a_pool_the_size_of_its_shard_up_to_a_piece():
    assert checkpoint.pool_bytes(1 << 20) == (1 << 20) + checkpoint.SLACK
    assert checkpoint.pool_bytes(1 << 40) == checkpoint.PIECE + checkpoint.SLACK


def host_program(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT / "pyfiles")}
    common = ["--dir", str(tmp_path / "work"), "--out", str(tmp_path / "run")]
    return subprocess.run(
        [sys.executable, "-m", "iolab.kinds.checkpoint.host", args[0], *common, *args[1:]],
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("phase", ["check", "write"])
def test_ranks_the_hosts_memory_cannot_hold_are_refused_before_any_starts(tmp_path, phase):
    """100,000 ranks of 64 MiB shards need about 7.6 TiB: refused in one line, no shard written."""
    done = host_program(tmp_path, phase, "--world", "100000", "--bytes-per-rank", str(64 << 20))
    assert done.returncode == 1 and done.stdout == ""
    line = done.stderr.strip()
    assert "\n" not in line and re.match(
        r"^100000 checkpoint ranks need \d+ MiB of memory on this host \(80 MiB each\)", line
    )
    assert "MiB available; give fewer writers or ranks, or spread them over more hosts" in line
    assert not any((tmp_path / "work").glob("ckpt-rank*"))


def test_the_check_passes_ranks_that_fit_and_refuses_a_host_without_a_rank(tmp_path):
    fits = host_program(tmp_path, "check", "--world", "2", "--bytes-per-rank", str(1 << 20))
    assert fits.returncode == 0 and "2 ranks fit" in fits.stderr
    short = host_program(tmp_path, "check", "--world", "2", "--hosts", "3", "--index", "2", "--bytes-per-rank", "1")
    assert short.returncode == 1
    assert short.stderr.strip() == (
        "2 checkpoint ranks leave some of the 3 hosts without one; give at least as many ranks as hosts, "
        "or select fewer hosts"
    )
