"""bench.calibrate on localhost (real Ansible, the CPU build of torch, the tiny model): samples and a profile that a
campaign then names."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch", reason="calibration needs torch (pip install torch==2.13.0)")


def test_bench_calibrate_writes_a_profile_a_campaign_emulates(cli, write_campaign):
    done = cli("bench.calibrate", "--models", "resnet50", "--batch-sizes", "2", "--scale", "tiny")
    steps = [s for s in cli.samples("calibration") if s["metric"] == "step_time" and s["host"] == "localhost"]
    assert len(steps) == 1 and steps[0]["unit"] == "s" and steps[0]["value"] > 0
    assert steps[0]["params"]["model"] == "resnet50" and steps[0]["params"]["batch_size"] == 2
    [path] = (cli.results / "calibration" / "profiles").glob("localhost-*.json")
    profile = json.loads(path.read_text())
    assert profile["device"]["device"] == "cpu" and profile["entries"][0]["step_s"] == steps[0]["value"]
    assert f"profile: {path}" in done.stdout and "resnet50 at batch 2 (tiny)" in done.stdout
    campaign = write_campaign(
        {
            "name": "itest-calibrated",
            "backends": [{"name": "itest-cal", "type": "tmpfs", "size": "64MiB"}],
            "dataset": {"kind": "imagenet-like", "files": 16, "seed": 1},
            "workloads": [
                {"name": "w", "type": "pytorch", "batch_size": 2, "accelerator": {"type": "calibrated"}},
                {"name": "v", "type": "pytorch", "batch_size": 4, "accelerator": {"type": "calibrated"}},
            ],
        }
    )
    refused = cli("bench.all", "--campaign", str(campaign), "--dry-run", check=False)
    assert refused.returncode != 0 and "measured resnet50 at batch 2, not 4" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
