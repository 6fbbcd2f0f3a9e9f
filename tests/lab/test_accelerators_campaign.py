"""A campaign with `search: accelerators` through bench.all on a simulated host, then its report.

Real Ansible over SSH, a real tmpfs, the data set made on the host, the real PyTorch loader
with emulated accelerators. The accelerator is slow on purpose (0.4 s per batch
of 8: 20 samples/s), so that any host feeds the one it is probed with and the
answer does not depend on this machine's speed. The search reaches its ceiling
(1: each probe costs a playbook and a torch start-up, about 8 s on a quiet machine;
the bisection and the interval are the unit tests'), so it answers "≥ 1" after
probing 1 three times. The probes measure 4 steps per rank, not MLPerf's 500 (the
test-only floor, IOLAB_PROBE_STEPS, at this test's time), and the answer says so.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.lab

pytest.importorskip("torch", reason="loader workloads need torch (pip install torch==2.13.0)")


def test_a_campaign_searches_the_accelerators_fed_and_its_report_opens_with_them(cli, write_campaign, sim_hosts):
    on_gpu01 = ("--inventory", str(sim_hosts.inventory), "--hosts", "gpu01")
    cli.env["IOLAB_PROBE_STEPS"] = "4"
    data = {
        "name": "itest-fed",
        "repetitions": 1,
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
                "accelerators": 1,
                "search": "accelerators",
            },
        ],
    }
    path = write_campaign(data)
    done = cli("bench.all", *on_gpu01, "--campaign", str(path))
    log = done.stdout + done.stderr
    # Without a terminal: one line per run, with its time and what is left; the probes in between.
    assert "run 1/2: seq on itest-fed, rep 1: read_bw" in log and "1 done, 1 left, about" in log
    assert "1 accelerator(s) per host, probe 1: AU" in log
    assert "run 2/2: slow-acc on itest-fed, rep 1: accelerators_fed 1  (" in log and "2 done, none left" in log

    samples = cli.samples("itest-fed")
    fed = {s["host"]: s for s in samples if s["metric"] == "accelerators_fed"}
    assert set(fed) == {"gpu01", "*"} and fed["*"]["value"] == 1 and fed["*"]["unit"] == "count"
    assert fed["*"]["params"]["au_threshold"] == 90 and fed["*"]["params"]["accelerator_type"] == "custom"
    meta = fed["*"]["metadata"]
    assert (meta["held"], meta["failed"], meta["bound"], meta["step_floor"]) == (1, None, "ceiling", 4)
    assert "probes of 4 steps per rank, under MLPerf's 500" in meta["flags"]
    # Each probe a run of its own, caches dropped before it, with its measured steps; 1 probed three times
    # (more where foreign CPU disturbed a probe: run again, not counted).
    probes = [p for p in meta["probes"] if p["counted"]]
    assert [(p["accelerators"], p["repeat"]) for p in probes][-1] == (1, len(meta["probes"]))
    assert len(probes) == 3
    au = {s["run_id"]: s for s in samples if s["metric"] == "au" and s["host"] == "gpu01"}
    assert set(au) == {p["run_id"] for p in meta["probes"]}
    assert {s["metadata"]["cache_state"] for s in au.values()} == {"dropped"}
    assert min(s["metadata"]["steps_per_rank"] for s in au.values()) >= 4
    # The answer stands for a stored probe: that run's AU and read rate.
    at = meta["at"]
    assert au[at["run_id"]]["value"] == at["au"] >= 90 and au[at["run_id"]]["params"]["accelerators"] == 1
    assert {r["status"] for r in cli.runs("itest-fed")} == {"ok"}
    assert sim_hosts.mounts_left() == {}

    text = cli("report", "--campaign", "itest-fed").stdout
    first_table = text[: text.index("median ± half-range")]
    lines = first_table.splitlines()
    assert lines[0].startswith(
        "campaign itest-fed: how many emulated accelerators per host each backend keeps at AU ≥ 90%"
    )
    assert lines[1].startswith("itest-fed (slow-acc): limited by ")
    # The workload's name heads its rows (a group line), the backend's row under it holds the answer and the AU.
    rows = lines[next(i for i, line in enumerate(lines) if i > 1 and line.strip() == "slow-acc") + 1 :]
    answer = next(line for line in rows if line.strip().startswith("itest-fed"))
    assert "≥ 1 custom" in answer and f"{at['au']:.1f}" in answer, first_table
    assert "lab-scale" in first_table
    assert "seq" in text[len(first_table) :]  # the fio figures below it

    again = cli("bench.all", *on_gpu01, "--campaign", str(path))
    assert "2 already stored, 0 to run" in again.stdout + again.stderr
