"""The storage side of a Ceph backend on localhost: the OSDs' (and MDS's) caches dropped before each run, and
the OSDs' perf counters sampled while it runs. A real single-node cluster (the session's lab in a box,
tests/labbox.py), real bench.all, real fio through librbd and ceph-fuse.
"""

from __future__ import annotations

import json

import pytest

from support import mounted

pytestmark = pytest.mark.integration

LEASE_WAIT_S = 600


@pytest.fixture
def lab(ceph_box):
    return ceph_box


def bench(cli, campaign, check: bool = True):
    """bench.all on localhost, waiting while another test run's campaign holds the host's lease."""
    return cli.bench(campaign, check, LEASE_WAIT_S)


FIO = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "3s", "ramp": "1s", "size": "64MiB"}


def ceph_fields(lab) -> dict:
    return lab.ceph_fields()


def host_files(cli, campaign: str, run_id: str) -> dict:
    raw = cli.results / campaign / "raw" / run_id / "localhost"
    return {p.name: p for p in raw.iterdir()}


def test_an_rbd_run_drops_the_osds_cache_and_samples_their_counters(lab, cli, write_campaign):
    campaign = write_campaign(
        {
            "name": "itest-osd-drop",
            "repetitions": 2,
            "backends": [
                {"name": "itest-osd-blk", "type": "rbd", "size": "64MiB", "image": "itest-osd-blk", **ceph_fields(lab)}
            ],
            "workloads": [FIO],
        }
    )
    bench(cli, campaign)

    bw = sorted(
        (s for s in cli.samples("itest-osd-drop") if s["metric"] == "read_bw" and s["host"] == "localhost"),
        key=lambda s: s["repetition"],
    )
    assert len(bw) == 2
    for sample in bw:
        record = sample["metadata"]["storage_cache_state"]["ceph"]
        assert record["dropped"] is True, record
        assert record["cluster"] == lab.ceph_client()["conf"]
        assert set(record["osds"]) == {"osd.0"}
        assert record["cache_bytes_after"] < record["cache_bytes_before"]
    # The second run's drop found the first run's reads in BlueStore's data cache, and emptied it.
    second = bw[1]["metadata"]["storage_cache_state"]["ceph"]["osds"]["osd.0"]
    assert second["before"]["bluestore_cache_data"] > 1 << 20
    assert second["after"]["bluestore_cache_data"] < second["before"]["bluestore_cache_data"] // 100

    # The OSD's counters, once a second over the run's window: the reads fio made reached the OSD.
    files = host_files(cli, "itest-osd-drop", bw[0]["run_id"])
    assert json.loads(files["run.json"].read_text())["launcher"] == "clustershell"  # the fan-out's one call a host
    lines = [json.loads(line) for line in files["osd_telemetry.jsonl"].read_text().splitlines()]
    assert lines[0]["type"] == "start" and lines[-1]["type"] == "end" and lines[-1]["errors"] == []
    samples = [r for r in lines if r["type"] == "sample"]
    assert len(samples) >= 2 and all(set(r["osd"]) == {"0"} for r in samples)
    osd_read = sum(r["osd"]["0"]["read_bytes"] for r in samples)
    fio_read = json.loads(files["fio.json"].read_text())["jobs"][0]["read"]["io_bytes"]
    assert 0.5 * fio_read < osd_read < 2 * fio_read, (osd_read, fio_read)
    assert all(r["osd"]["0"]["op_await"] > 0 for r in samples if r["osd"]["0"]["ops"])

    cli("report", "--campaign", "itest-osd-drop", "--format", "html")
    page = (cli.results / "itest-osd-drop" / "report.html").read_text()
    assert "dropped: clients + OSDs" in page
    assert "osd_read_bw" in page and "osd_iops" in page
    assert mounted() == []


def osd_cache_bytes(files: dict) -> tuple[float, float, float]:
    """(hit, miss, read) bytes of osd.0 over a run, from its osd_telemetry.jsonl."""
    lines = [json.loads(line) for line in files["osd_telemetry.jsonl"].read_text().splitlines()]
    assert lines[-1]["type"] == "end" and lines[-1]["errors"] == [], lines[-1]
    osd = [r["osd"]["0"] for r in lines if r["type"] == "sample"]
    hit, miss, read = (sum(o[k] for o in osd) for k in ("cache_hit_bytes", "cache_miss_bytes", "read_bytes"))
    return hit, miss, read


def test_a_cold_rbd_read_misses_the_osd_cache_and_the_warm_one_hits_it(lab, cli, write_campaign):
    """cache: warm on the lab's OSD (a fixed 1.5 GiB BlueStore cache): the cold run, after the drop, reads its
    bytes from the device; the warm run right after it, with no drop, finds what the cold run read in the cache.
    Without the OSDs' drop the second repetition's cold run would hit what the first's warm run left cached."""
    image = 1 << 30
    campaign = write_campaign(
        {
            "name": "itest-osd-cold-warm",
            "repetitions": 2,
            "cache": "warm",
            "backends": [
                {"name": "itest-osd-cw", "type": "rbd", "size": "1GiB", "image": "itest-osd-cw", **ceph_fields(lab)}
            ],
            # The whole image, for one second without a ramp: the cold run reads (about) one pass over it.
            "workloads": [{**FIO, "size": "1GiB", "runtime": "1s", "ramp": "0"}],
        }
    )
    bench(cli, campaign)

    runs = {
        (s["repetition"], s["params"]["cache"]): s
        for s in cli.samples("itest-osd-cold-warm")
        if s["metric"] == "read_bw" and s["host"] == "localhost"
    }
    assert set(runs) == {(1, "cold"), (1, "warm"), (2, "cold"), (2, "warm")}
    for rep in (1, 2):
        cold, warm = runs[(rep, "cold")], runs[(rep, "warm")]
        record = cold["metadata"]["storage_cache_state"]["ceph"]
        assert record["dropped"] is True and set(record["osds"]) == {"osd.0"}, record
        hit, miss, read = osd_cache_bytes(host_files(cli, "itest-osd-cold-warm", cold["run_id"]))
        assert read > 64 << 20, read
        # Cold: every byte of the first pass over the image came from the device.
        assert miss >= 0.9 * min(read, image), (rep, hit, miss, read)
        assert hit <= max(read - image, 0) + 0.1 * read, (rep, hit, miss, read)
        # Warm: what the cold run read (and, past it, the rest of the image) is in the OSD's cache.
        warm_hit, _, warm_read = osd_cache_bytes(host_files(cli, "itest-osd-cold-warm", warm["run_id"]))
        assert warm_hit >= 0.9 * min(warm_read, read), (rep, warm_hit, warm_read, read)
        assert warm["metadata"]["cache_state"].startswith("warm"), warm["metadata"]["cache_state"]
    # The drop before the second cold run found the first warm run's reads in the cache, and emptied it.
    osd = runs[(2, "cold")]["metadata"]["storage_cache_state"]["ceph"]["osds"]["osd.0"]
    assert osd["before"]["bluestore_cache_data"] > 256 << 20, osd
    assert osd["after"]["bluestore_cache_data"] < 1 << 20, osd


def test_a_cephfs_run_drops_the_mds_cache_too(lab, cli, write_campaign):
    campaign = write_campaign(
        {
            "name": "itest-mds-drop",
            "repetitions": 1,
            "backends": [
                {"name": "itest-osd-fs", "type": "cephfs", "method": "fuse", "fs_name": "iolab", **ceph_fields(lab)}
            ],
            "workloads": [{**FIO, "size": "16MiB"}],
        }
    )
    bench(cli, campaign)

    sample = next(s for s in cli.samples("itest-mds-drop") if s["metric"] == "read_bw" and s["host"] == "localhost")
    record = sample["metadata"]["storage_cache_state"]["ceph"]
    assert record["dropped"] is True, record
    assert record["method"] == "ceph tell osd.* cache drop; ceph tell mds.* cache drop"
    assert set(record["mds"]) == {"mds.iolab"}
    cli("report", "--campaign", "itest-mds-drop", "--format", "html")
    assert "dropped: clients + OSDs + MDS" in (cli.results / "itest-mds-drop" / "report.html").read_text()
    assert mounted() == []


def test_a_checkpoint_on_cephfs_is_written_then_read_back_cold(lab, cli, write_campaign):
    """MLPerf's checkpointing on the lab's CephFS: shards fsynced, caches dropped (clients, OSDs, MDS), read cold."""
    campaign = write_campaign(
        {
            "name": "itest-ckpt-fs",
            "repetitions": 1,
            "backends": [
                {"name": "itest-ckpt-fs", "type": "cephfs", "method": "fuse", "fs_name": "iolab", **ceph_fields(lab)}
            ],
            "workloads": [{"name": "ckpt", "type": "checkpoint", "model": "llama3-8b", "scale": 0.0004, "writers": 2}],
        }
    )
    bench(cli, campaign)
    by = {(s["host"], s["metric"]): s for s in cli.samples("itest-ckpt-fs")}
    for phase in ("write", "read"):
        assert by[("*", f"checkpoint_{phase}_bw")]["value"] > 0 and by[("*", f"checkpoint_{phase}_s")]["unit"] == "s"
    read = by[("localhost", "checkpoint_read_bw")]["metadata"]
    assert read["checkpoint_fsync"] is True
    assert read["checkpoint_resident_before_read_bytes"] == 0 and read["checkpoint_read_cold"] is True
    assert read["storage_cache_state"]["ceph"]["dropped"] is True
    assert mounted("/mnt/iolab/itest-ckpt-fs") == []


def test_an_image_smaller_than_the_backend_is_refused_in_one_line_before_its_prefill(lab, cli, write_campaign):
    def campaign(name: str, size: str):
        backend = {"name": "itest-rbd-size", "type": "rbd", "size": size, "image": "itest-rbd-size", **ceph_fields(lab)}
        return write_campaign({"name": name, "backends": [backend], "workloads": [{**FIO, "size": "32MiB"}]})

    # The image there already, of 64 MiB: made as the role makes one (a campaign of its own, which made it before,
    # also prefilled and read it: ≈ 15–20 s more, for nothing this test asserts)
    lab.rbd("create", "--size", "64M", f"{lab.ceph_client()['rbd_pool']}/itest-rbd-size")
    done = bench(cli, campaign("itest-rbd-size-big", "128MiB"), check=False)
    said = " ".join(done.stderr.split())
    assert done.returncode == 1 and "Traceback" not in said
    assert (
        "image iolab/itest-rbd-size already exists with 67108864 bytes, less than backend itest-rbd-size's size "
        "of 134217728 bytes" in said
    ), said
    assert [r["status"] for r in cli.runs("itest-rbd-size-big")] == ["failed"]
    assert mounted() == []


def test_a_pool_that_does_not_exist_is_named_with_the_pools_that_do(lab, cli, write_campaign):
    """A Ceph backend naming a pool the cluster lacks: the run says the pool is missing and which pools exist
    (rbd ls answered ENOENT), not that the cluster does not answer (issue 23)."""
    ceph = {**ceph_fields(lab), "pool": "itest-no-pool"}
    campaign = write_campaign(
        {
            "name": "itest-no-pool",
            "backends": [
                {"name": "itest-nopool-blk", "type": "rbd", "size": "64MiB", **ceph},
                {"name": "itest-nopool-snap", "type": "rbd_snapshot", "fio_size": "64MiB", "size": "128MiB", **ceph},
            ],
            "workloads": [FIO],
        }
    )
    done = bench(cli, campaign, check=False)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    pools = lab.ceph("osd", "pool", "ls")
    errors = [r["error"] for r in cli.runs("itest-no-pool")]
    assert len(errors) == 2, done.stdout[-3000:] + done.stderr
    for error in errors:
        assert f"pool itest-no-pool does not exist in the Ceph cluster of {ceph['ceph_conf']}" in error, error
        assert f"its pools: {', '.join(pools)}" in error and "does not answer" not in error, error
        assert "ceph osd pool create itest-no-pool" in error
