import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from iolab.kinds.fio import host as fio_jobs
from iolab.shared import fio_options

MIB = 1 << 20


def test_auto_size_fits_the_target_with_room_to_spare():
    assert fio_jobs.choose_size(0, free=1024 * MIB, existing=0) == 819 * MIB  # a 1 GiB tmpfs
    assert fio_jobs.choose_size(0, free=100 << 30, existing=0) == 1 << 30  # capped at 1 GiB
    assert fio_jobs.choose_size(0, free=100 * MIB, existing=412 * MIB) == 409 * MIB  # its own file counts


def test_an_explicit_size_that_does_not_fit_is_an_error_before_fio_runs():
    with pytest.raises(ValueError, match="needs 2048 MiB but the target has 1024 MiB free"):
        fio_jobs.choose_size(2048 * MIB, free=1024 * MIB, existing=0)
    with pytest.raises(ValueError, match="only 10 MiB free"):
        fio_jobs.choose_size(0, free=10 * MIB, existing=0)


def test_profiles_follow_the_field_report():
    bssplit = fio_options.profile_options("imagenet-bssplit", {})
    assert bssplit["bssplit"] == "2K/1:4K/2:8K/4:16K/8:32K/13:64K/38:128K/33:256K/1"
    assert (bssplit["iodepth"], bssplit["rw"], bssplit["norandommap"]) == ("128", "randread", "1")
    seq = fio_options.profile_options("seq-read-1m", {"iodepth": 8})
    assert (seq["bs"], seq["direct"], seq["ioengine"], seq["iodepth"]) == ("1M", "1", "libaio", "8")


@pytest.mark.parametrize(
    "key, value", [("exec_prerun", "touch /tmp/x"), ("bs", "4k\nexec_prerun=id"), ("Bad Key", "1")]
)
def test_options_that_could_run_commands_are_refused(key, value):
    with pytest.raises(ValueError, match="not allowed"):
        fio_options.profile_options("seq-read-1m", {key: value})


def test_prepare_writes_a_job_that_fio_accepts(tmp_path):
    chosen = fio_jobs.prepare(
        tmp_path / "run",
        tmp_path / "work",
        fio_options.profile_options("rand-read-16k", {"runtime": "1", "time_based": "1"}),
        wanted=4 * MIB,
        jobfile=None,
    )
    job = (tmp_path / "run" / "job.fio").read_text()
    assert f"filename={tmp_path / 'work' / fio_options.DATA_FILE}" in job and "size=4194304" in job
    assert (tmp_path / "work" / fio_options.DATA_FILE).stat().st_size == 4 * MIB  # laid out before the timed run
    assert chosen["size"] == 4 * MIB and chosen["size_chosen"] == "campaign"


def _resident(path) -> int:
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)], capture_output=True, text=True, check=True
    ).stdout
    return int(out.strip())


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping caches needs root")
def test_prepare_drops_the_caches_after_laying_the_file_out(tmp_path):
    """The drop comes after everything prepare touches (the layout, a data set's histogram), just before the run."""
    work = Path(tempfile.mkdtemp(dir="/var/tmp"))  # a disk-backed file system: tmpfs pages cannot be dropped
    try:
        argv = [
            sys.executable,
            "-m",
            "iolab.kinds.fio.host",
            "prepare",
            "--dir",
            str(tmp_path),
            "--workdir",
            str(work),
            "--options",
            json.dumps({"rw": "read", "bs": "1M"}),
            "--size",
            str(16 * MIB),
            "--drop-caches",
        ]
        subprocess.run(argv, capture_output=True, text=True, check=True)
        data = work / fio_options.DATA_FILE
        dropped = json.loads((tmp_path / "drop_caches.json").read_text())
        assert dropped["dropped_at"] >= data.stat().st_mtime and dropped["method"].startswith("sync;")
        assert _resident(data) == 0
    finally:
        shutil.rmtree(work)
