"""iolab.host.ceph_osds without a cluster: the counters' arithmetic, the series the report draws, the cache state
it prints, and what the host command does with a cluster it cannot reach."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from iolab.host import ceph_osds
from iolab.store import ceph
from support import ROOT


def perf(
    op: int, reads: int, writes: int, out_bytes: int, in_bytes: int, lat_sum: float, hit: int = 0, miss: int = 0
) -> dict:
    """The parts of an OSD's `perf dump` the sampler reads (as Ceph 16 prints them)."""
    return {
        "osd": {
            "op": op,
            "op_r": reads,
            "op_w": writes,
            "op_out_bytes": out_bytes,
            "op_in_bytes": in_bytes,
            "op_latency": {"avgcount": op, "sum": lat_sum, "avgtime": 0},
            "op_r_latency": {"avgcount": reads, "sum": lat_sum, "avgtime": 0},
            "op_w_latency": {"avgcount": writes, "sum": 0.0, "avgtime": 0},
        },
        "bluestore": {"bluestore_buffer_hit_bytes": hit, "bluestore_buffer_miss_bytes": miss},
    }


def test_an_interval_gives_rates_and_the_mean_latency_of_its_own_operations():
    before = ceph_osds.counters(perf(100, 100, 0, 100 << 20, 0, 1.0, hit=0, miss=100 << 20))
    after = ceph_osds.counters(perf(300, 300, 0, 300 << 20, 0, 7.0, hit=50 << 20, miss=250 << 20))
    got = ceph_osds.interval(before, after, 2.0)
    assert got["ops"] == 200 and got["iops"] == 100
    assert got["read_bytes"] == 200 << 20 and got["read_bw"] == pytest.approx((100 << 20), rel=1e-5)
    assert got["write_bw"] == 0
    assert got["op_await"] == pytest.approx(6.0 / 200) and got["read_await"] == pytest.approx(6.0 / 200)
    assert got["write_await"] == 0.0  # no write in the interval: no mean
    assert got["cache_hit_bytes"] == 50 << 20 and got["cache_miss_bytes"] == 150 << 20


def test_a_restarted_osd_counts_nothing_rather_than_negative():
    before = ceph_osds.counters(perf(500, 500, 0, 500 << 20, 0, 5.0))
    after = ceph_osds.counters(perf(10, 10, 0, 10 << 20, 0, 0.1))
    assert all(v >= 0 for v in ceph_osds.interval(before, after, 1.0).values())


def test_the_report_reads_the_series_by_osd(tmp_path):
    lines = [
        {"type": "start", "t": 10.0, "osds": [0, 3]},
        {
            "type": "sample",
            "t": 11.0,
            "dt": 1.0,
            "osd": {"0": {"read_bw": 5.0, "iops": 2.0, "op_await": 0.01}, "3": {"read_bw": 7.0}},
        },
        {"type": "sample", "t": 12.0, "dt": 1.0, "osd": {"0": {"read_bw": 6.0}}},
        {"type": "end", "t": 12.1, "errors": []},
    ]
    (tmp_path / ceph.OSD_FILE).write_text("".join(json.dumps(r) + "\n" for r in lines) + "{torn")
    series = ceph.load_series(tmp_path)
    assert series["osd_read_bw{osd=0}"] == [(11.0, 5.0), (12.0, 6.0)]
    assert series["osd_read_bw{osd=3}"] == [(11.0, 7.0)]
    assert series["osd_op_await{osd=0}"] == [(11.0, 0.01)]
    assert ceph.load_series(tmp_path / "missing") == {}


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        ({"ceph": {"dropped": True}}, "dropped: clients + OSDs"),
        ({"ceph": {"dropped": True, "mds": {"mds.a": {}}}}, "dropped: clients + OSDs + MDS"),
        ({"dropped_on": ["osd01"], "ceph": {"dropped": True}}, "dropped: clients + OSDs + storage hosts"),
        ({"ceph": {"dropped": False, "error": "cannot reach"}}, "dropped: clients (not the OSDs: cannot reach)"),
        ("no storage hosts in the inventory", "dropped"),
    ],
)
def test_the_cache_state_says_what_the_drop_reached(storage, expected):
    assert ceph.cache_state({"cache_state": "dropped", "storage_cache_state": storage}) == expected


def test_a_kept_cache_is_not_called_dropped():
    meta = {"cache_state": "not dropped (cache: keep)", "storage_cache_state": {"ceph": {"dropped": True}}}
    assert ceph.cache_state(meta) == "not dropped (cache: keep)"


def test_only_ceph_backends_get_a_cluster_for_the_run():
    from iolab.campaign.model import Campaign

    campaign = Campaign.model_validate(
        {
            "name": "c",
            "backends": [
                {"name": "fs", "type": "cephfs", "ceph_conf": "/c/ceph.conf", "keyring": "/c/k"},
                {"name": "blk", "type": "rbd"},
                {"name": "mem", "type": "tmpfs", "size": "1GiB"},
            ],
            "workloads": [{"name": "w", "type": "fio", "profile": "seq-read-1m"}],
        }
    )
    fs, blk, mem = campaign.backends
    assert fs.storage_side() == {
        "run_ceph": {"conf": "/c/ceph.conf", "keyring": "/c/k", "client": "admin", "mds": True}
    }
    assert blk.storage_side()["run_ceph"]["mds"] is False
    assert mem.storage_side() == {}


def host_command(*args: str) -> subprocess.CompletedProcess:
    """`python -m iolab.host.ceph_osds` with the system Python, as hosts run it (python3-rados is a Debian package)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")}
    return subprocess.run(
        ["/usr/bin/python3", "-m", "iolab.host.ceph_osds", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_cluster_out_of_reach_is_recorded_not_fatal(tmp_path):
    if subprocess.run(["/usr/bin/python3", "-c", "import rados"], capture_output=True, check=False).returncode:
        pytest.skip("python3-rados is not installed (apt-get install python3-rados)")
    cluster = {"conf": str(tmp_path / "ceph.conf"), "keyring": str(tmp_path / "keyring"), "client": "admin"}
    done = host_command("drop", "--cluster", json.dumps(cluster))
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["dropped"] is False and str(tmp_path / "ceph.conf") in record["error"]
    assert "osds" not in record


def test_a_bad_cluster_argument_is_one_line():
    done = host_command("drop", "--cluster", "not json")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "--cluster 'not json': give a JSON object with conf, keyring and client"
