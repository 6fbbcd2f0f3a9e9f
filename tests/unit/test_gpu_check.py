"""bench/gpu_check.py on this machine, which has no GPU: its small CPU mode end to end, and NVML's facts through
FakeNvml (a stand-in for the NVML library: there is no GPU here)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from fake_nvml import FakeNvml

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_gpu_check():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("gpu_check", BENCH / "gpu_check.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_the_small_mode_calibrates_then_runs_the_loader_itself_and_judges_each_run(tmp_path):
    out = tmp_path / "check.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "gpu_check.py"), "--small", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(out.read_text())
    assert found["facts"]["gpus"] == 0 and found["facts"]["nvml"] == {"absent": "NVML: NVML Shared Library Not Found"}
    [entry] = found["calibration"]["entries"]
    assert (entry["model"], entry["batch"], entry["scale"]) == ("resnet50", 4, "tiny") and entry["samples_per_s"] > 0
    assert found["calibration"]["device"]["device"] == "cpu"
    assert list(found["runs"]) == ["synthetic", "pil", "packed"]
    assert any(reason.startswith("dali: ") for reason in found["skipped"])
    ceiling = found["runs"]["synthetic"]["images_per_s"]
    assert ceiling > 0 and found["runs"]["synthetic"]["gb_per_s"] == 0  # the synthetic leg reads nothing
    for reader in ("pil", "packed"):
        run = found["runs"][reader]
        # The loader's own window: 3 steps, the first not measured; the bytes it read; a verdict with its evidence.
        assert run["steps"] == 2 and run["images_per_s"] > 0 and run["gb_per_s"] > 0
        assert run["ratio"] == run["images_per_s"] / ceiling
        assert run["verdict"]["side"] in ("gpu", "client", "storage", "undetermined")
        assert "images/s" in run["verdict"]["reason"] and "GPU utilisation not measured" in run["verdict"]["reason"]
    assert sum(line.startswith(("pil:", "packed:")) for line in done.stdout.splitlines()) == 2


def test_the_facts_name_the_gpus_nvml_sees(monkeypatch):
    """FakeNvml stands in for the NVML library (there is no GPU here): what it reports reaches the check's facts."""
    gpu_check = load_gpu_check()
    fake = FakeNvml()
    opened = gpu_check.gpu_telemetry.open_nvml(fake)  # the real opening, of the fake library
    monkeypatch.setattr(gpu_check.gpu_telemetry, "open_nvml", lambda: opened)
    facts = gpu_check.facts()
    assert facts["nvml"] == {
        "source": "nvml",
        "count": 2,
        "driver": "580.95.05",
        "names": ["NVIDIA H100 80GB HBM3"] * 2,
    }
    assert fake.calls["shutdown"] == 1


def test_a_data_set_smaller_than_two_batches_is_refused_in_one_line():
    done = subprocess.run(
        [sys.executable, str(BENCH / "gpu_check.py"), "--files", "4", "--batch-size", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "--files 4 is less than two batches of 4: make it at least 8, or lower --batch-size"
