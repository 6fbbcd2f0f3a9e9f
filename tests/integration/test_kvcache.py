"""The KV-cache workload on localhost: real clients writing (np.save, fsync), dropping and reading real .npy files on
a real tmpfs, two seconds each; the 9/10 limit before the start and while writing; a users search's answer; and on
the lab in a box's CephFS and an RBD image mapped read-write with ext4 (tests/labbox.py), the Ceph side's caches
dropped before each run."""

from __future__ import annotations

import json

from support import mounted

SCALE = 1 / 32  # entries of 2 to 98 MiB for Llama-3.1-8B


def test_kvcache_runs_stays_under_nine_tenths_and_answers_its_search(cli, write_campaign):
    path = write_campaign(
        {
            "name": "itest-kv",
            "backends": [
                {"name": "itest-kv-mem", "type": "tmpfs", "size": "256MiB"},  # 2 clients' largest entries fit
                {"name": "itest-kv-tiny", "type": "tmpfs", "size": "64MiB"},  # not one entry of 98 MiB
            ],
            "workloads": [
                {"name": "kv", "type": "kvcache", "users": 2, "clients": 2, "duration": "2s", "context_scale": SCALE},
                {
                    "name": "served",
                    "type": "kvcache",
                    "users": 1,
                    "duration": "2s",
                    "context_scale": SCALE,
                    "search": "users",
                    "latency_bound": "10s",
                },
            ],
        }
    )
    done = cli.bench(path, check=False)
    assert done.returncode != 0  # the tiny tmpfs is refused, before anything is written there
    assert "before it is 9/10 full" in done.stdout + done.stderr
    samples = cli.samples("itest-kv")
    by = {(s["backend"], s["workload"], s["host"], s["metric"], s["params"].get("rank")): s for s in samples}
    read = by[("itest-kv-mem", "kv", "*", "read_bw", None)]
    assert read["value"] > 0 and read["params"]["per_token_bytes"] == 128 << 10
    worst = by[("itest-kv-mem", "kv", "*", "kv_read_p95_max", None)]["value"]
    ranks = [by[("itest-kv-mem", "kv", "localhost", "kv_read_p95", r)]["value"] for r in (0, 1)]
    assert worst == max(ranks) > 0  # the rules' figure: the most of the ranks' P95s
    host = by[("itest-kv-mem", "kv", "localhost", "read_bw", None)]["metadata"]
    assert len(host["kv_ranks"]) == 2 and all(0 < r["fill_peak"] <= 0.9 for r in host["kv_ranks"])
    assert host["cache_state"] == "dropped"
    run_id = by[("itest-kv-mem", "kv", "localhost", "read_bw", None)]["run_id"]
    raw = cli.results / "itest-kv" / "raw" / run_id / "localhost"
    assert json.loads((raw / "run.json").read_text())["launcher"] == "clustershell"  # the fan-out's one call
    served = by[("itest-kv-mem", "served", "*", "kv_served", None)]
    assert served["value"] == 1 and served["metadata"]["bound"] == "ceiling"  # 1 user, the ceiling, held
    assert len(served["metadata"]["probes"]) >= 3  # the point probed three times
    failed = [r for r in cli.runs("itest-kv") if r["backend"] == "itest-kv-tiny"]
    assert failed and all(r["status"] == "failed" and "9/10 full" in r["error"] for r in failed)
    report = cli("report", "--campaign", "itest-kv").stdout
    assert "KV cache: the most user(s) per client" in report and "every trial's figures" in report
    assert mounted("/mnt/iolab/itest-kv") == []


def test_kvcache_on_cephfs_and_an_rbd_scratch_image(cli, write_campaign, ceph_box):
    pool = ceph_box.ceph_client()["rbd_pool"]
    rbd = {"type": "rbd_snapshot", "scratch": True, "pool": pool, "image": "itest-kv-rbd", "size": "1GiB"}
    path = write_campaign(
        {
            "name": "itest-kv-ceph",
            "backends": [
                {"name": "itest-kv-fs", "type": "cephfs", **ceph_box.ceph_fields()},
                {"name": "itest-kv-rbd", **rbd, **ceph_box.ceph_fields()},
            ],
            "workloads": [{"name": "kv", "type": "kvcache", "users": 2, "duration": "2s", "context_scale": SCALE}],
        }
    )
    try:
        cli.bench(path)
    finally:
        ceph_box.rbd("rm", "--no-progress", f"{pool}/itest-kv-rbd")
    by = {(s["backend"], s["host"], s["metric"]): s for s in cli.samples("itest-kv-ceph")}
    for backend in ("itest-kv-fs", "itest-kv-rbd"):
        assert by[(backend, "*", "read_bw")]["value"] > 0 and by[(backend, "*", "kv_storage_write_bytes")]["value"] > 0
        host = by[(backend, "localhost", "read_bw")]["metadata"]
        assert host["storage_cache_state"]["ceph"]["dropped"] is True  # the OSDs' (and the MDS's) caches too
        assert all(r["fill_peak"] <= 0.9 for r in host["kv_ranks"])  # CephFS's statfs lags: it may read 0
    assert by[("itest-kv-rbd", "localhost", "read_bw")]["metadata"]["host"]["mount"]["fstype"] == "ext4"
    assert mounted("/mnt/iolab/itest-kv") == []
