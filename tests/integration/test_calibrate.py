"""bench.calibrate on localhost (real Ansible, the CPU build of torch, the tiny model): samples and a profile that a
campaign then names; with no flags on this CPU machine, a refusal naming --scale tiny."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from support import ROOT

pytest.importorskip("torch", reason="calibration needs torch (pip install torch==2.13.0)")


def test_bench_calibrate_writes_the_profile_its_campaign_names_which_a_campaign_emulates(cli, write_campaign):
    """The campaign's `profile: latest` is the profile this call makes (issue 44, 5: it was refused for lack of it)."""
    workload = {"name": "w", "type": "pytorch", "batch_size": 2, "accelerator": {"type": "calibrated"}}
    data = {
        "name": "itest-calibrated",
        "backends": [{"name": "itest-cal", "type": "tmpfs", "size": "64MiB"}],
        "dataset": {"kind": "imagenet-like", "files": 16, "seed": 1},
        "workloads": [workload],
    }
    first = write_campaign(data)
    done = cli("bench.calibrate", "--campaign", str(first), "--models", "resnet50", "--scale", "tiny")
    steps = [s for s in cli.samples("calibration") if s["metric"] == "step_time" and s["host"] == "localhost"]
    assert len(steps) == 1 and steps[0]["unit"] == "s" and steps[0]["value"] > 0
    assert steps[0]["params"]["model"] == "resnet50" and steps[0]["params"]["batch_size"] == 2
    [path] = (cli.results / "calibration" / "profiles").glob("localhost-*.json")
    profile = json.loads(path.read_text())
    assert profile["device"]["device"] == "cpu" and profile["entries"][0]["step_s"] == steps[0]["value"]
    assert f"profile: {path}" in done.stdout and "resnet50 at batch 2 (tiny)" in done.stdout
    assert cli("bench.all", "--campaign", str(first), "--dry-run").returncode == 0
    other = write_campaign({**data, "workloads": [{**workload, "batch_size": 4}]}, "other.yml")
    refused = cli("bench.all", "--campaign", str(other), "--dry-run", check=False)
    assert refused.returncode != 0 and "measured resnet50 at batch 2, not 4" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(Path("/proc/driver/nvidia/gpus").is_dir(), reason="this machine has an NVIDIA GPU")
def test_bench_calibrate_with_no_flags_on_this_cpu_machine_refuses_at_once_naming_scale_tiny(cli):
    """Issue 44, 4: it ran full-size ResNet-50 at batch 400 on the CPU for hours; now one line within 3 minutes."""
    started = time.monotonic()
    done = subprocess.run(cli.argv("bench.calibrate"), cwd=ROOT, env=cli.env, capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    assert time.monotonic() - started < 180 and done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "localhost has no GPU" in done.stderr and "--scale tiny" in done.stderr
    assert not (cli.results / "calibration").exists()  # nothing ran
