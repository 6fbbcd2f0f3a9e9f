"""A campaign with a data set and data-loading workloads, through bench.all on localhost.

Real Ansible, a real tmpfs, a data set generated on the host by the dataset phase,
the PyTorch loader with two emulated accelerators (two ranks on this host), the
metadata walk, and fio reading with the data set's own bssplit.
"""

from __future__ import annotations

import re

import pytest

from support import mounted

pytest.importorskip("torch", reason="loader workloads need torch (pip install torch==2.13.0)")


def test_a_loader_campaign_runs_end_to_end(cli, write_campaign, tmp_path):
    from iolab.host.dataset.gen import gen
    from iolab.host.dataset.histogram import bssplit, histogram

    data = {
        "name": "itest-dl",
        "repetitions": 1,
        "backends": [{"name": "itest-dl", "type": "tmpfs", "size": "128MiB"}],
        "dataset": {"kind": "imagenet-like", "files": 120, "seed": 4, "classes": 6},
        "workloads": [
            {
                "name": "train",
                "type": "pytorch",
                "reader": "packed",
                "workers": 1,
                "batch_size": 10,
                "accelerator": {"type": "custom", "compute_per_batch": "30ms"},
                "accelerators": 2,
            },
            {"name": "meta", "type": "metadata", "threads": 2},
            {
                "name": "bss",
                "type": "fio",
                "profile": "bssplit-from-dataset",
                "runtime": "1s",
                "ramp": "0s",
                "size": "16MiB",
            },
        ],
    }
    path = write_campaign(data)
    cli("bench.all", "--campaign", str(path))

    # The same seed gives the same bytes: the data set the hosts made is this one.
    local = gen(tmp_path / "same", files=120, seed=4, classes=6, workers=2)
    samples = cli.samples("itest-dl")
    assert {r["status"] for r in cli.runs("itest-dl")} == {"ok"}
    by = {(s["workload"], s["host"], s["metric"]): s for s in samples if not s["params"].get("syscall")}

    rate, au = by["train", "localhost", "samples_per_s"], by["train", "localhost", "au"]
    assert rate["unit"] == "samples/s" and rate["value"] > 0 and 0 < au["value"] <= 100 and au["unit"] == "%"
    assert by["train", "*", "samples_per_s"]["value"] > 0
    assert rate["metadata"]["dataset_manifest_hash"] == local.hash
    assert rate["metadata"]["cache_state"] == "dropped"
    assert rate["params"]["accelerator"] == {"type": "custom", "compute_per_batch": 0.03, "model": "resnet50"}
    ranks = rate["metadata"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and sum(r["batches"] for r in ranks) == 12  # 120 samples / 10
    assert by["train", "localhost", "read_bw"]["value"] > 0 and by["train", "localhost", "cpu_cores"]["value"] > 0

    for metric in ("readdir_per_s", "stat_per_s", "open_per_s"):
        assert by["meta", "localhost", metric]["unit"] == "ops/s" and by["meta", "localhost", metric]["value"] > 0
    assert by["meta", "localhost", "stat_per_s"]["metadata"]["files"] == 120

    job = by["bss", "localhost", "read_bw"]["metadata"]["job"]
    assert job["bssplit"] == bssplit(histogram(tmp_path / "same")) and job["dataset_manifest_hash"] == local.hash

    raw = cli.results / "itest-dl" / "raw" / rate["run_id"] / "localhost"
    assert {"loader.json", "run.json", "drop_caches.json", "telemetry.jsonl"} <= {p.name for p in raw.iterdir()}
    # Host telemetry rides along every loader run too: the tool's own CPU, from its process tree.
    tool_cpu = [
        s
        for s in samples
        if s["workload"] == "train"
        and s["host"] == "localhost"
        and s["metric"] == "cpu_cores"
        and s["params"].get("scope") == "tool"
    ]
    assert len(tool_cpu) == 1 and tool_cpu[0]["value"] > 0
    assert mounted() == []

    again = cli("bench.all", "--campaign", str(path))
    assert "3 already stored, 0 to run" in again.stdout + again.stderr


def test_a_data_set_that_does_not_fit_fails_before_generating_and_unmounts(cli, write_campaign):
    data = {
        "name": "itest-dl-full",
        "backends": [{"name": "itest-small", "type": "tmpfs", "size": "16MiB"}],
        "dataset": {"kind": "imagenet-like", "files": 400, "seed": 1},
        "workloads": [{"name": "train", "type": "pytorch", "reader": "packed"}],
    }
    done = cli("bench.all", "--campaign", str(write_campaign(data)), check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    runs = cli.runs("itest-dl-full")
    assert [r["status"] for r in runs] == ["failed"]
    assert "MiB free" in runs[0]["error"] and "fewer files" in runs[0]["error"]
    assert mounted() == []


def test_bench_accelerators_searches_and_answers(cli, write_campaign):
    """At the test-only floor of 4 measured steps (IOLAB_PROBE_STEPS; the answer says so) and a ceiling of 1:
    1 probed three times, each its own run (more where foreign CPU disturbed one: run again)."""
    cli.env["IOLAB_PROBE_STEPS"] = "4"
    data = {
        "name": "itest-acc",
        "backends": [{"name": "itest-acc", "type": "tmpfs", "size": "96MiB"}],
        "dataset": {"kind": "imagenet-like", "files": 64, "seed": 2, "classes": 4},
        "workloads": [{"name": "train", "type": "pytorch"}],
    }
    done = cli(
        "bench.accelerators",
        "--campaign",
        str(write_campaign(data)),
        "--backend",
        "itest-acc",
        "--type",
        "custom",
        "--compute",
        "0.05s",
        "--workers",
        "1",
        "--batch-size",
        "8",
        "--no-decode",
        "--max",
        "1",
    )
    lines = [line for line in done.stdout.splitlines() if "accelerator(s) per host, probe" in line]
    counted = [line for line in lines if "disturbed" not in line]
    assert len(counted) == 3 and {line.split()[0] for line in lines} == {"1"}
    # The answer follows from the measured AUs (how many a busy 2-core machine feeds varies): every probe must hold.
    au = [float(re.search(r"AU\s+([0-9.]+)", line).group(1)) for line in counted]
    expected = "answer: ≥ 1 custom (the workload's ceiling)" if min(au) >= 90 else "answer: none"
    assert expected in done.stdout and "⚑ probes of 4 steps per rank, under MLPerf's 500" in done.stdout, done.stdout
    probes = [s for s in cli.samples("accelerators-itest-acc-custom") if s["metric"] == "au"]
    assert {s["params"]["accelerators"] for s in probes} == {1} and len({s["run_id"] for s in probes}) == len(lines)
    assert mounted() == []


def test_a_tensorflow_campaign_sweeps_private_threads(cli, write_campaign):
    pytest.importorskip("tensorflow", reason="tensorflow workloads need tensorflow-cpu (pip install 'iolab[tf]')")
    data = {
        "name": "itest-tf",
        "backends": [{"name": "itest-tf", "type": "tmpfs", "size": "96MiB"}],
        "dataset": {"kind": "imagenet-like", "files": 60, "seed": 3, "classes": 4},
        "workloads": [
            {
                "name": "tfdata",
                "type": "tensorflow",
                "batch_size": 10,
                "private_threads": [1, 2],
                "accelerator": {"type": "custom", "compute_per_batch": "20ms"},
            }
        ],
    }
    cli("bench.all", "--campaign", str(write_campaign(data)))
    rates = [s for s in cli.samples("itest-tf") if s["metric"] == "samples_per_s" and s["host"] == "localhost"]
    assert sorted(s["params"]["private_threads"] for s in rates) == [1, 2]
    assert all(s["value"] > 0 and s["metadata"]["versions"]["tensorflow"] for s in rates)
    assert len([s for s in cli.samples("itest-tf") if s["metric"] == "au"]) == 2
    assert mounted() == []


def test_profilers_ride_along_a_loader_run(cli, write_campaign):
    """perf (system-wide) and py-spy (the launcher, its rank and the rank's DataLoader worker) beside a loader."""
    data = {
        "name": "itest-prof",
        "backends": [{"name": "itest-prof", "type": "tmpfs", "size": "64MiB"}],
        "dataset": {"kind": "imagenet-like", "files": 120, "seed": 2, "classes": 4},
        "workloads": [
            {
                "name": "train",
                "type": "pytorch",
                "reader": "pil",
                "workers": 1,
                "batch_size": 10,
                "epochs": 2,
                "profilers": ["perf", "py-spy"],
            }
        ],
    }
    cli("bench.all", "--campaign", str(write_campaign(data)))
    rate = next(s for s in cli.samples("itest-prof") if s["metric"] == "samples_per_s" and s["host"] == "localhost")
    profiling = rate["metadata"]["profiling"]
    assert profiling["errors"] == [] and set(profiling["files"]) == {"perf.data", "perf-report.txt", "py-spy.txt"}
    raw = cli.results / "itest-prof" / "raw" / rate["run_id"] / "localhost"
    stacks = (raw / "py-spy.txt").read_text()
    assert "run_steps" in stacks  # the rank's training loop
    assert "_load" in stacks  # a worker process reading and decoding a sample (Samples._load)
    assert "python" in (raw / "perf-report.txt").read_text()
    assert mounted() == []
