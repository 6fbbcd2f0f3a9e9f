"""bench/gpu_check.py on this machine, which has no GPU: its CPU path, and NVML figures through FakeNvml."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

# Before any test of this process reads an inventory in-process: Ansible then replaces sys.intern with an object,
# and torch._dynamo (which the optimizer's first use imports) refuses to load beside it ("substitute_in_graph
# expects a function"). A test process's concern only: iolab's controller never imports torch.
import torch._dynamo  # noqa: F401
from fake_nvml import FakeNvml

BENCH = Path(__file__).resolve().parents[2] / "bench"
QUICK = ["--files", "16", "--batch-size", "4", "--steps", "2", "--size", "64", "--workers", "0"]


def load_gpu_check():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("gpu_check", BENCH / "gpu_check.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_the_cpu_path_trains_from_both_readers_and_says_what_it_skipped(tmp_path):
    out = tmp_path / "check.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "gpu_check.py"), *QUICK, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(out.read_text())
    assert found["device"] == "cpu" and found["h2d"] is None
    assert [t["reader"] for t in found["training"]] == ["packed", "pil"]
    assert all(t["images"] == 8 and t["images_per_s"] > 0 and t["gpu_util_pct"] is None for t in found["training"])
    assert found["nvml"] == {"absent": "NVML: NVML Shared Library Not Found"}
    assert any("torch sees no CUDA GPU" in reason for reason in found["skipped"])
    lines = done.stdout.splitlines()
    assert "H2D: skipped, no CUDA GPU" in lines
    assert sum("images/s" in line for line in lines) == 2


def test_gpu_utilisation_during_the_steps_comes_from_nvml(monkeypatch):
    """FakeNvml stands in for the NVML library (there is no GPU here): its utilisation reaches the check."""
    gpu_check = load_gpu_check()
    fake = FakeNvml()
    monkeypatch.setattr(
        gpu_check.telemetry,
        "open_nvml",
        lambda: (
            fake,
            [("handle", 0)],
            {"source": "nvml", "count": 1, "driver": "580.95.05", "names": ["NVIDIA H100 80GB HBM3"]},
        ),
    )
    found = gpu_check.check(gpu_check.parser().parse_args(QUICK))
    assert [t["gpu_util_pct"] for t in found["training"]] == [87.0, 87.0]
    assert fake.calls["shutdown"] == 1
    lines = gpu_check.report(found)
    assert "NVML: 1 GPU(s), driver 580.95.05: NVIDIA H100 80GB HBM3" in lines
    assert sum("GPU util 87 %" in line for line in lines) == 2


def test_a_data_set_smaller_than_two_batches_is_refused_in_one_line():
    done = subprocess.run(
        [sys.executable, str(BENCH / "gpu_check.py"), "--files", "4", "--batch-size", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "--files 4 is less than two batches of 4: make it at least 8, or lower --batch-size"
