"""A results disk that fills mid-campaign: the run is failed and said, resume redoes it, no line is torn.

Real: the campaign runs through ./lab with its results on a small tmpfs; once the first
run's samples are stored, the test fills that tmpfs (as another job on the controller
would), and empties it again before resuming.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from support import ROOT, mounted

FIO_1S = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "ramp": "0s", "size": "16MiB"}


@pytest.fixture
def results_tmpfs(tmp_path, monkeypatch):
    path = tmp_path / "results"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=72m", "itest-results", str(path)], check=True)
    monkeypatch.setenv("IOLAB_RESULTS", str(path))
    yield path
    subprocess.run(["umount", str(path)], check=False)


def fill_up(path: Path, leave: int) -> None:
    """Take all but `leave` bytes of the file system's free space with `path`, though the campaign writes beside it
    (a size read a moment before, then allocated at once, failed: the campaign had written meanwhile)."""
    with path.open("ab") as f:
        for _ in range(50):
            stat = os.statvfs(path.parent)
            free = stat.f_bavail * stat.f_frsize - leave
            if free <= 0:
                return
            try:
                os.posix_fallocate(f.fileno(), os.fstat(f.fileno()).st_size, free)
                return
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    raise AssertionError(f"{path.parent} could not be filled: the campaign kept writing")


def _lines(path: Path) -> list[dict]:
    data = path.read_bytes() if path.exists() else b""
    assert not data or data.endswith(b"\n"), "a torn line was left"
    return [json.loads(line) for line in data.splitlines()]


def test_a_full_results_disk_fails_the_run_and_resume_redoes_it(cli, write_campaign, results_tmpfs):
    cli.results = results_tmpfs
    cli.env["IOLAB_RESULTS"] = str(results_tmpfs)
    campaign = write_campaign(
        {
            "name": "itest-full",
            "repetitions": 3,
            "backends": [{"name": "itest-full", "type": "tmpfs", "size": "64MiB"}],
            "workloads": [FIO_1S],
        }
    )
    samples_path = results_tmpfs / "itest-full" / "samples.jsonl"
    proc = subprocess.Popen(
        cli.argv("bench.all", "--campaign", str(campaign)),
        cwd=ROOT,
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    filler = results_tmpfs / "filler"
    try:
        deadline = time.monotonic() + 300
        while not samples_path.exists() or not samples_path.stat().st_size:
            assert proc.poll() is None and time.monotonic() < deadline, "the first run never stored its samples"
            time.sleep(0.2)
        # The disk fills up: everything but a few bytes, so the next run's files or samples do not fit.
        fill_up(filler, leave=4096)
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, output
    assert "No space left on device" in output and "a resume runs it again" in output
    assert "Traceback" not in output
    assert mounted("/mnt/iolab/itest-full") == []  # torn down all the same
    first = _lines(samples_path)
    stored = {s["run_id"] for s in first}
    assert len(stored) in (1, 2)  # the runs before the disk filled

    filler.unlink()
    again = cli("bench.all", "--campaign", str(campaign))
    assert f"{len(stored)} already stored, {3 - len(stored)} to run" in again.stdout + again.stderr
    samples = _lines(samples_path)
    assert len({s["run_id"] for s in samples}) == 3
    keys = [(s["run_id"], s["host"], s["metric"], json.dumps(s["params"], sort_keys=True)) for s in samples]
    assert len(keys) == len(set(keys))  # no duplicates
