"""iolab.host.prepare: a loader run's prepare, one call on both routes (the fan-out's --before, the role's step)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
