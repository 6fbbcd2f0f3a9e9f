"""A job file that would run a command on the hosts stops `./lab bench.all` before anything runs (issue 12)."""

from __future__ import annotations

from support import mounted


def test_an_included_exec_prerun_stops_the_campaign_before_anything_ran(cli, write_campaign, tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "inc.fio").write_text(f"exec_prerun=touch {marker}\n")
    (tmp_path / "jf.fio").write_text("[j]\nrw=read\nbs=4k\nsize=4m\ninclude inc.fio\n")
    data = {
        "name": "itest-confined",
        "repetitions": 1,
        "backends": [{"name": "itest-mem", "type": "tmpfs", "size": "64MiB"}],
        "workloads": [{"name": "mine", "type": "fio", "jobfile": "jf.fio"}],
    }
    done = cli("bench.all", "--campaign", str(write_campaign(data)), check=False)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert f"{tmp_path / 'inc.fio'}: [j] exec_prerun=touch {marker}: exec_prerun runs commands" in done.stderr
    assert not marker.exists()
    assert not (cli.results / "itest-confined").exists()  # no run recorded, nothing mounted
    assert mounted() == []


def test_a_job_file_for_a_big_disk_is_refused_on_the_default_tmpfs_before_anything_runs(cli, tmp_path):
    """A job file written for a big disk (30 GiB in three jobs) against the default 1 GiB tmpfs (issue 23)."""
    job = tmp_path / "big-disk.fio"
    job.write_text("[global]\nrw=read\nbs=1m\nsize=10G\n[one]\n[two]\nnumjobs=2\n")
    refusals = {
        "256MiB": "lays out 30720 MiB per host, more than the workload's size of 256 MiB (bench.fio --size)",
        "": "lays out 30720 MiB but tmpfs backend tmpfs has 1024 MiB free",
    }
    for size, refusal in refusals.items():
        done = cli("bench.fio", "--profile", str(job), *(["--size", size] if size else []), check=False)
        assert done.returncode != 0
        assert "Traceback" not in done.stderr and refusal in done.stderr
        assert not (cli.results / "fio-tmpfs").exists()  # no run recorded, nothing mounted
        assert mounted("/mnt/iolab/tmpfs") == []
