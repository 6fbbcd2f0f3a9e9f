"""A campaign with `search: accelerators` through bench.all on localhost, then its report.

Real Ansible, a real tmpfs, the data set made on the host, the real PyTorch loader
with emulated accelerators. The accelerator is slow on purpose (0.4 s per batch
of 8: 20 samples/s), so that any host feeds both the 1 and the 2 it is probed
with and the answer does not depend on this machine's speed.
"""

from __future__ import annotations

import pytest

from support import mounted

pytest.importorskip("torch", reason="loader workloads need torch (pip install torch==2.13.0)")


def test_a_campaign_searches_the_accelerators_fed_and_its_report_opens_with_them(cli, write_campaign):
    data = {
        "name": "itest-fed",
        "repetitions": 2,
        "backends": [{"name": "itest-fed", "type": "tmpfs", "size": "128MiB"}],
        "dataset": {"kind": "imagenet-like", "files": 48, "seed": 2, "classes": 4},
        "workloads": [
            {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "ramp": "0s", "size": "16MiB"},
            {
                "name": "slow-acc",
                "type": "pytorch",
                "reader": "packed",
                "decode": False,
                "workers": 1,
                "batch_size": 8,
                "accelerator": {"type": "custom", "compute_per_batch": "0.4s"},
                "accelerators": 2,
                "search": "accelerators",
            },
        ],
    }
    path = write_campaign(data)
    done = cli("bench.all", "--campaign", str(path))
    log = done.stdout + done.stderr
    # Without a terminal: one line per run, with its time and what is left; the probes in between.
    assert "run 1/3: seq on itest-fed, rep 1: read_bw" in log and "1 done, 2 left, about" in log
    assert "accelerator(s) per host: AU" in log
    assert "run 3/3: slow-acc on itest-fed, rep 1: accelerators_fed 2 count" in log and "3 done, none left" in log

    samples = cli.samples("itest-fed")
    fed = {s["host"]: s for s in samples if s["metric"] == "accelerators_fed"}
    assert set(fed) == {"localhost", "*"} and fed["*"]["value"] == 2 and fed["*"]["unit"] == "count"
    assert fed["*"]["params"]["au_threshold"] == 90 and fed["*"]["params"]["accelerator_type"] == "custom"
    # The answer stands for a stored probe: that run's AU and read rate, caches dropped before it.
    at = fed["*"]["metadata"]["at"]
    probe = {
        s["metric"]: s
        for s in samples
        if s["run_id"] == at["run_id"] and s["host"] == "localhost" and not s["params"].get("syscall")
    }
    assert probe["au"]["value"] == at["au"] >= 90 and probe["au"]["params"]["accelerators"] == 2
    assert probe["read_bw"]["value"] == at["read_bw"] > 0
    assert probe["au"]["metadata"]["cache_state"] == "dropped"
    assert [p["accelerators"] for p in fed["*"]["metadata"]["probes"]] == [1, 2]
    assert {r["status"] for r in cli.runs("itest-fed")} == {"ok"}
    assert mounted() == []

    text = cli("report", "--campaign", "itest-fed").stdout
    first_table = text[: text.index("median ± half-range")]
    assert first_table.startswith("campaign itest-fed: how many emulated accelerators each backend keeps at AU ≥ 90%")
    row = next(line for line in first_table.splitlines() if "slow-acc" in line)
    assert "itest-fed" in row and "2 custom" in row and f"{at['au']:.1f}" in row
    assert "lab-scale" in first_table
    assert "seq" in text[len(first_table) :]  # the fio figures below it

    again = cli("bench.all", "--campaign", str(path))
    assert "3 already stored, 0 to run" in again.stdout + again.stderr
