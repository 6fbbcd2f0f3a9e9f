"""iolab.host.prepare: a loader run's prepare, one call on both routes (the fan-out's --before, the role's step)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def prepare(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")}
    argv = [sys.executable, "-m", "iolab.host.prepare", "loader", "--host", "gpu01", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize(
    ("kind", "packs", "says"),
    [
        ("pytorch", ["packed"], "{root}/manifest.jsonl, {root}/packed/pack.json missing on gpu01: the campaign's"),
        ("tensorflow", [], "no TFRecord pack at {root}/tfrecord on gpu01: the campaign's dataset phase"),
        ("metadata", [], "no data set at {root} on gpu01: the campaign's dataset phase makes it"),
    ],
)
def test_a_missing_data_set_is_one_line_and_nothing_is_made(tmp_path, kind, packs, says):
    root, run = tmp_path / "dataset", tmp_path / "run"
    extra = [f"--pack={p}" for p in packs] + (["--pack=tfrecord"] if kind == "tensorflow" else [])
    done = prepare("--kind", kind, "--dir", str(run), "--root", str(root), *extra, "--drop-caches")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == done.stderr.strip().splitlines()[0]  # one line
    assert done.stderr.startswith(says.format(root=root)), done.stderr
    assert not run.exists()  # refused before the run directory or the drop


def test_a_present_data_set_gets_its_run_directory_and_the_recorded_drop(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("dropping the page cache needs root")
    root, run = tmp_path / "dataset", tmp_path / "run"
    (root / "packed").mkdir(parents=True)
    (root / "manifest.jsonl").write_text("")
    (root / "packed" / "pack.json").write_text("{}")
    done = prepare("--kind", "pytorch", "--dir", str(run), "--root", str(root), "--pack=packed", "--drop-caches")
    assert done.returncode == 0, done.stderr
    assert "started_at" in json.loads(done.stdout.splitlines()[-1])
    assert json.loads((run / "drop_caches.json").read_text())["method"] == "sync; echo 3 > /proc/sys/vm/drop_caches"


# A rank's settings (iolab.host.kvcache_tiers.Settings): Llama-3.1-8B's shape, entries of 2 to 98 MiB
KV = json.dumps(
    {
        "model": "llama3.1-8b",
        "layers": 32,
        "kv_heads": 8,
        "head_dim": 128,
        "users": 1,
        "duration": 1.0,
        "seed": 1,
        "context_scale": 1 / 32,
    }
)


def test_a_kvcache_prepare_refuses_in_the_line_its_role_s_check_gave_and_makes_no_run_directory(tmp_path):
    """A million clients' largest entries pass any target's room: iolab.kinds.kvcache.host's refusal, word for word."""
    work, run = tmp_path / "kvcache", tmp_path / "run"
    done = prepare_kvcache("--run-dir", str(run), "--dir", str(work), "--clients", "1000000", "--options", KV)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == done.stderr.strip().splitlines()[0]  # one line
    assert done.stderr.startswith(f"{work}: 1000000 client(s) need room") and "before it is 9/10 full" in done.stderr
    assert not run.exists()


def test_a_kvcache_prepare_that_fits_pauses_then_makes_the_run_directory(tmp_path):
    run = tmp_path / "run"
    argv = ["--run-dir", str(run), "--dir", str(tmp_path / "kvcache"), "--options", KV, "--pause", "0.5"]
    called = time.time()
    done = prepare_kvcache(*argv)
    assert done.returncode == 0, done.stderr
    started_at = json.loads(done.stdout.splitlines()[-1])["started_at"]
    assert run.is_dir() and started_at >= called + 0.5  # after the pause: the call's start, for the common start's lead


def prepare_kvcache(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")}
    argv = [sys.executable, "-m", "iolab.kinds.kvcache.host", "prepare", "--host", "gpu01", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


def test_a_run_without_a_data_set_gets_its_directory_and_the_drop_only_when_its_policy_says(tmp_path):
    """`directory`: a calibration's (no drop) and an S3 objects run's (the run's cache policy: --drop-caches)."""
    if os.geteuid() != 0:
        pytest.skip("dropping the page cache needs root")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")}
    kept, dropped = tmp_path / "kept", tmp_path / "dropped"
    for run, extra in ((kept, []), (dropped, ["--drop-caches"])):
        argv = [sys.executable, "-m", "iolab.host.prepare", "directory", "--dir", str(run), *extra]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0 and "started_at" in json.loads(done.stdout.splitlines()[-1]), done.stderr
    assert kept.is_dir() and not (kept / "drop_caches.json").exists()
    assert json.loads((dropped / "drop_caches.json").read_text())["method"].startswith("sync; echo 3")
