"""The checkpoint workload's contract: schema, the host program's record, and MLPerf's duration and throughput."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from iolab import campaign, record
from iolab.errors import UserError
from iolab.parsers import checkpoint as parser
from iolab.samples import Sample

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
        "iolab.host.checkpoint",
        "--dir",
        str(work),
        "--out",
        str(out),
        "--ranks",
        "3",
        "--first-rank",
        "6",
    ]
    env = {"PYTHONPATH": str(ROOT / "pyfiles")}
    subprocess.run([*common[:3], "write", *common[3:], "--bytes-per-rank", str(3 << 20)], check=True, env=env)
    shards = sorted(work.iterdir())
    assert [p.name for p in shards] == ["ckpt-rank00006.bin", "ckpt-rank00007.bin", "ckpt-rank00008.bin"]
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
