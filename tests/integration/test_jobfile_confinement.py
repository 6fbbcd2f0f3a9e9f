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
