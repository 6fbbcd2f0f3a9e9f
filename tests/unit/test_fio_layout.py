"""The room a user's job file lays out, computed before fio runs, against what fio itself lays out (issue 23)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from iolab.campaign.model import load
from iolab.errors import UserError
from iolab.kinds.fio import host as fio_jobs
from iolab.shared import fio_jobfile, fio_options

MIB = 1 << 20
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")

# Job files as users write them, small enough to lay out here; each exact (fio lays out what iolab counts).
EXACT = [
    "[a]\nrw=read\nsize=4m\n",
    "[global]\nsize=2m\nrw=read\n[a]\nnrfiles=2\n[b]\nnumjobs=3\n[global]\nsize=1m\n[c]\n",  # inheritance
    "[a]\nrw=read\nsize=4m\nfilesize=1m\nnrfiles=3\n",  # filesize wins over size
    "[a]\nrw=read\nsize=4m\noffset=2m\n",  # the file reaches past the offset
    "[a]\nrw=read\nsize=1m\nnumjobs=3\nfilename=shared\noffset_increment=1m\n",  # clones share it
    "[a]\nrw=randwrite\nsize=2m\n[b]\nrw=read\nsize=3m\nfilename=a.0.0\n",  # two jobs, one file: once
    "[a]\nrw=read\nsize=1m\nnumjobs=3\ndirectory=x:y\n",  # clones take the directories in turn
    "[a]\nrw=read\nsize=1m\nnumjobs=2\nfilename_format=z.$filenum\n",  # no $jobnum: shared
    # fio's units (MiB is 10**6 bytes, m 2**20 unless kb_base=1000), hex, an alias
    "[a]\nrw=read\nsize=2MiB\n[b]\nreadwrite=read\nsize=0x100000\n[c]\nrw=read\nsize=1m\nkb_base=1000\n",
    "[a]\nrw=read\nioengine=null\nsize=64m\n",  # lays out nothing
]


def fio_layout(text: str, where: Path) -> dict[str, int]:
    """What fio itself lays out for `text` in the directory `where` (names relative to it: size)."""
    where.mkdir()
    for directory in ("x", "y"):
        (where / directory).mkdir()
    (where.parent / "job.fio").write_text(text)
    subprocess.run(
        ["fio", "--create_only=1", "--output=/dev/null", str(where.parent / "job.fio")], cwd=where, check=True
    )
    return {str(p.relative_to(where)): p.stat().st_size for p in where.rglob("*") if p.is_file()}


@needs_fio
@pytest.mark.parametrize("text", EXACT)
def test_the_layout_is_what_fio_lays_out(text, tmp_path):
    assert fio_jobfile.layout(fio_jobfile.parse_text(text, "job")) == fio_layout(text, tmp_path / "work")


@needs_fio
@pytest.mark.parametrize(
    "text",
    [
        "[a]\nrw=read\nnumjobs=2\nnrfiles=2\nfilesize=256k-1m\n",  # a range: each file somewhere in it
        "[a]\nrw=read\nsize=10%\nfilesize=1m\n",  # a percentage of the file's size
        "[a]\nrw=read\nsize=4m\nnrfiles=3\n",  # size shared out among the files
    ],
)
def test_the_layout_is_never_less_than_fio_lays_out(text, tmp_path):
    counted = fio_jobfile.layout(fio_jobfile.parse_text(text, "job"))
    laid_out = fio_layout(text, tmp_path / "work")
    assert counted.keys() == laid_out.keys()
    assert all(counted[name] >= size for name, size in laid_out.items())


def test_a_size_iolab_cannot_read_is_refused_not_guessed():
    with pytest.raises(ValueError, match=r"\[a\] size=\(4k\*2\): iolab cannot read this size"):
        fio_jobfile.layout(fio_jobfile.parse_text("[a]\nsize=(4k*2)\n", "job.fio"))
    with pytest.raises(ValueError, match="at most 100000 per job"):
        fio_jobfile.layout(fio_jobfile.parse_text("[a]\nsize=1g\nnumjobs=1000\nnrfiles=1000\n", "job.fio"))


def test_a_job_file_above_the_workloads_size_or_the_room_is_refused():
    big = fio_jobfile.parse_text("[global]\nsize=10G\n[a]\nrw=read\n", "big.fio")
    with pytest.raises(ValueError, match="lays out 10240 MiB per host, more than the workload's size of 256 MiB"):
        fio_options.jobfile_room(big, 256 * MIB, None, "the target")
    with pytest.raises(ValueError, match="lays out 10240 MiB but the target has 1024 MiB free"):
        fio_options.jobfile_room(big, 0, 1024 * MIB, "the target")
    assert fio_options.jobfile_room(big, 0, None, "the target") == 10 << 30  # room unknown on the controller


@pytest.fixture
def small_target(small_tmpfs):
    """A 64 MiB tmpfs, as the backend's target (a small one: a job file larger than it fails harmlessly)."""
    return small_tmpfs("size=64m")


@needs_fio
def test_prepare_refuses_a_job_file_larger_than_the_target_before_laying_out(tmp_path, small_target):
    (tmp_path / "user.fio").write_text("[global]\nrw=read\nsize=32m\n[one]\n[two]\nnumjobs=2\n")  # 96 MiB
    with pytest.raises(ValueError, match="the job file lays out 96 MiB but the target has 64 MiB free"):
        fio_jobs.prepare(tmp_path / "run", small_target / "work", {}, 0, tmp_path / "user.fio")
    assert list((small_target / "work").iterdir()) == []  # fio laid nothing out


@needs_fio
def test_prepare_lays_out_a_job_file_that_fits_within_its_size(tmp_path):
    (tmp_path / "user.fio").write_text("[global]\nrw=read\nfilesize=1m\n[a]\nnrfiles=2\nnumjobs=2\n")
    chosen = fio_jobs.prepare(tmp_path / "run", tmp_path / "work", {}, 4 * MIB, tmp_path / "user.fio")
    assert chosen["layout_bytes"] == 4 * MIB
    assert sum(p.stat().st_size for p in (tmp_path / "work").iterdir()) == 4 * MIB
    with pytest.raises(ValueError, match="more than the workload's size of 3 MiB"):
        fio_jobs.prepare(tmp_path / "run", tmp_path / "work", {}, 3 * MIB, tmp_path / "user.fio")


def campaign(tmp_path: Path, job: str, size: str = "") -> Path:
    (tmp_path / "job.fio").write_text(job)
    (tmp_path / "c.yml").write_text(
        "name: layout\nbackends:\n  - {name: mem, type: tmpfs, size: 1GiB}\n"
        f"workloads:\n  - {{name: mine, type: fio, jobfile: job.fio{', size: ' + size if size else ''}}}\n"
    )
    return tmp_path / "c.yml"


def test_a_campaign_refuses_a_job_file_larger_than_its_tmpfs_or_size(tmp_path):
    with pytest.raises(UserError, match="lays out 10240 MiB but tmpfs backend mem has 1024 MiB free"):
        load(campaign(tmp_path, "[global]\nsize=10G\n[a]\nrw=read\n"))
    with pytest.raises(UserError, match="lays out 512 MiB per host, more than the workload's size of 256 MiB"):
        load(campaign(tmp_path, "[a]\nrw=read\nsize=256m\nnumjobs=2\n", size="256MiB"))
    assert load(campaign(tmp_path, "[a]\nrw=read\nsize=128m\nnumjobs=2\n", size="256MiB")).workloads[0].jobtext
