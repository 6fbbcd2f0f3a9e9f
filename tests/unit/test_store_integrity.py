"""No sample lost silently: a full or read-only results disk, a torn line, checked before the first run.

A full disk is made real two ways: a file-size limit (RLIMIT_FSIZE, so write(2) comes up
short and then fails, as on a disk that fills mid-write) in a child process, and a small
tmpfs (root).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.samples import ResultStore, Sample, StoreError

ROOT = Path(__file__).resolve().parents[2]


def sample(run_id: str, metric: str = "read_bw") -> Sample:
    return Sample(
        campaign="integrity",
        run_id=run_id,
        repetition=1,
        host="h1",
        backend="b",
        workload="w",
        metric=metric,
        value=1.0,
        unit="B/s",
        started_at="t0",
        ended_at="t1",
        params={"pad": "x" * 500},
        metadata={},
    )


CHILD = """
import resource, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from iolab.samples import ResultStore, Sample, StoreError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)          # EFBIG instead of a signal, as ENOSPC comes
store = ResultStore(Path(sys.argv[1]), "integrity")
limit = store.samples_path.stat().st_size + int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
samples = [Sample(campaign="integrity", run_id="r2", repetition=1, host="h1", backend="b", workload="w",
                  metric=f"m{i}", value=1.0, unit="B/s", started_at="t0", ended_at="t1",
                  params={"pad": "x" * 500}, metadata={}) for i in range(8)]
try:
    store.add_samples(samples, "the samples of run r2")
    print("stored")
except StoreError as exc:
    print(exc)
"""


def test_a_short_write_is_undone_and_said(tmp_path):
    store = ResultStore(tmp_path, "integrity")
    store.add_samples([sample("r1")])
    before = store.samples_path.read_bytes()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), "1500", str(ROOT / "pyfiles")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "could not store the samples of run r2" in out.stdout and "a resume runs it again" in out.stdout
    assert store.samples_path.read_bytes() == before  # cut back: no torn line, no partial run
    assert store.completed() == {("r1", "h1")}  # so the resume runs r2 again


def test_a_torn_last_line_is_cut_before_the_first_run(tmp_path):
    store = ResultStore(tmp_path, "integrity")
    store.add_samples([sample("r1")])
    with store.samples_path.open("ab") as handle:
        handle.write(b'{"campaign": "integrity", "run_id": "r2", "ho')  # a crash mid-append
    assert [s.run_id for s in store.samples()] == ["r1"]  # never half a record
    notes = store.preflight()
    assert notes and "cut a torn last line" in notes[0]
    assert store.samples_path.read_bytes().endswith(b"\n")
    assert all(json.loads(line) for line in store.samples_path.read_text().splitlines())
    assert store.preflight() == []


@pytest.fixture
def small_tmpfs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "results"
    mnt.mkdir()
    mounted = []

    def mount(*options: str) -> Path:
        subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "iolab-test-results", str(mnt)], check=True)
        mounted.append(mnt)
        return mnt

    yield mount
    for path in mounted:
        subprocess.run(["umount", str(path)], check=False)


def test_an_unwritable_results_directory_is_found_before_the_first_run(small_tmpfs):
    store = ResultStore(small_tmpfs("ro", "size=1m"), "integrity")
    with pytest.raises(StoreError, match="is not writable .*Read-only file system"):
        store.preflight()


def test_a_results_disk_without_room_is_found_before_the_first_run(small_tmpfs):
    store = ResultStore(small_tmpfs("size=8m"), "integrity")
    with pytest.raises(StoreError, match="has [78] MiB free, less than the 64 MiB"):
        store.preflight()
    assert store.preflight(min_free=1 << 20) == []


def test_a_full_disk_keeps_every_line_whole(small_tmpfs):
    store = ResultStore(small_tmpfs("size=64k"), "integrity")
    stored = 0
    with pytest.raises(StoreError, match="No space left on device"):
        for index in range(1000):
            store.add_samples([sample(f"r{index}")])
            stored += 1
    assert stored > 10
    assert store.samples_path.read_bytes().endswith(b"\n")
    assert len(store.samples()) == stored
