"""The results index under real campaigns on localhost (real Ansible, fio, tmpfs): a controller SIGKILLed between a
JSONL append and the index's write loses nothing and doubles nothing; three campaigns, one after another (one moved
aside by --no-resume), land in results/iolab.db; report.history draws them; results.index --rebuild gives the same
rows; status shows each campaign's runs.

On localhost, in the CI's localhost group (tests/conftest.py): on a simulated host (2026-11-29, to balance the two
workers) it lengthened the simlab group, which the userspace NFS test has made the longer since."""

from __future__ import annotations

import json

import pytest

from support import mounted

pytestmark = pytest.mark.integration

FIO_1S = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "ramp": "0s", "size": "16MiB"}


def campaign(name: str) -> dict:
    return {
        "name": name,
        "repetitions": 2,
        "backends": [{"name": "itest-rdb", "type": "tmpfs", "size": "64MiB"}],
        "workloads": [FIO_1S],
    }


def rows(cli) -> list:
    done = cli("results.query", "SELECT sample_id, value FROM samples ORDER BY sample_id", "--format", "json")
    return json.loads(done.stdout)


def test_a_crash_then_three_campaigns_land_in_the_index(cli, write_campaign):
    path_a = write_campaign(campaign("itest-rdb-a"), "a.yml")
    path_b = write_campaign(campaign("itest-rdb-b"), "b.yml")
    cli.env["IOLAB_TEST_CRASH_AT"] = "index:2"  # run 2's samples and record appended, not indexed: SIGKILL
    killed = cli("bench.all", "--campaign", str(path_a), check=False)
    del cli.env["IOLAB_TEST_CRASH_AT"]
    assert killed.returncode == -9, killed.stderr[-2000:]
    in_files = len(cli.samples("itest-rdb-a"))
    assert in_files and {s["repetition"] for s in cli.samples("itest-rdb-a")} == {1, 2}

    status = cli("status", "--campaign", "itest-rdb-a").stdout  # any command: it catches the index up first
    assert "itest-rdb-a" in status
    index = cli("results.index")
    assert "1 store(s): index and files agree" in index.stdout, index.stdout
    assert len(rows(cli)) == in_files  # nothing lost, nothing doubled

    cli("bench.all", "--campaign", str(path_a))  # cleans what the killed one left; both runs are stored
    cli("bench.all", "--campaign", str(path_b))
    fresh = cli("bench.all", "--campaign", str(path_a), "--no-resume")
    assert "earlier results kept in" in fresh.stdout + fresh.stderr
    before = rows(cli)
    rebuilt = cli("results.index", "--rebuild")
    assert "3 store(s): index and files agree; rebuilt from the files" in rebuilt.stdout
    assert rows(cli) == before and len(before) == sum(
        len(cli.samples(d.name)) for d in cli.results.iterdir() if d.is_dir()
    )

    series = json.loads(cli("report.history", "--metric", "read_bw", "--format", "json").stdout)
    (read_bw,) = [s for s in series if s["workload"] == "seq" and s["metric"] == "read_bw"]
    stores = [p["store"] for p in read_bw["points"]]
    assert len(stores) == 3 and stores[1:] == ["itest-rdb-b", "itest-rdb-a"] and stores[0].startswith("itest-rdb-a.")
    assert all(p["n"] == 2 and p["min"] <= p["median"] <= p["max"] for p in read_bw["points"])
    status = cli("status").stdout
    assert all(name in status for name in stores)
    assert mounted("/mnt/iolab/itest-rdb") == []
