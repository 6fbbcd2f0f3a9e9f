"""A fault that failed, hung or never fired, through bench.all on localhost (real Ansible, a tmpfs, real commands
with --allow-commands): each such run is failed, stores no sample, and the next call plans it again; a campaign file
edited between two calls is refused in one line. The injector's side alone: tests/unit/test_fault_outcomes.py."""

from __future__ import annotations

import json

import yaml

FIO = {"type": "fio", "profile": "seq-read-1m", "runtime": "6s", "ramp": "0s", "size": "16MiB"}
NAME = "itest-fo"


def campaign_file(tmp_path, plain_runtime: str = "2s"):
    data = {
        "name": NAME,
        "backends": [{"name": NAME, "type": "tmpfs", "size": "192MiB"}],
        "workloads": [
            {**FIO, "name": "plain", "runtime": plain_runtime},
            {**FIO, "name": "failed", "faults": [{"at": "4s", "what": "command", "argv": ["false"]}]},
            {**FIO, "name": "hung", "faults": [{"at": "4s", "what": "command", "argv": ["sleep", "600"]}]},
            {  # a checkpoint's length is the storage's: a fault past its end is found after the run
                "name": "never",
                "type": "checkpoint",
                "model": "llama3-8b",
                "scale": 0.0005,
                "writers": 2,
                "faults": [{"at": "300s", "what": "command", "argv": ["true"]}],
            },
        ],
    }
    path = tmp_path / f"{NAME}.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def bench(cli, path):
    """bench.all --allow-commands, waiting while another test's campaign holds this host's lease."""
    import time

    deadline = time.monotonic() + 600
    while True:
        done = cli("bench.all", "--campaign", str(path), "--allow-commands", check=False)
        if " is held by " not in done.stderr or time.monotonic() > deadline:
            return done
        time.sleep(5)


def test_runs_whose_fault_failed_hung_or_never_fired_are_failed_and_run_again_and_an_edited_file_is_refused(
    cli, tmp_path
):
    path = campaign_file(tmp_path)
    done = bench(cli, path)
    said = [line for line in done.stderr.splitlines() if line.startswith("iolab:")]
    assert done.returncode == 1 and len(said) == 1 and "3 failure(s)" in said[0], done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    errors = {r["workload"]: r["error"] for r in cli.runs(NAME) if r["status"] == "failed"}
    assert set(errors) == {"failed", "hung", "never"}, cli.runs(NAME)
    assert errors["failed"].endswith("not injected (false: exit status 1)")
    assert errors["hung"].endswith("not injected (sleep 600: the run ended before it did; killed)")
    assert "at 300 s, healed by the run's teardown: never fired (the run's play ended" in errors["never"]
    samples = cli.samples(NAME)
    assert {s["workload"] for s in samples} == {"plain"}  # no sample of a run whose fault did not happen
    assert not any("faults" in s["metadata"] for s in samples)
    stored = len(cli.runs(NAME))

    campaign_file(tmp_path, plain_runtime="3s")  # the stored run's workload edited: refused before anything runs
    edited = bench(cli, path)
    said = [line for line in edited.stderr.splitlines() if line.startswith("iolab:")]
    assert edited.returncode == 2 and len(said) == 1, edited.stdout + edited.stderr
    assert f"campaign {NAME}: its file changed since" in said[0]
    assert said[0].endswith(
        "1 stored run(s) are no longer in it (plain on itest-fo, rep 1); run with --no-resume to start over (the "
        "stored results are moved aside, kept), or put the file back"
    )
    assert len(cli.runs(NAME)) == stored
    assert json.loads((cli.results / NAME / "campaign.json").read_text())["plan"][0]["workload"] == "plain"

    campaign_file(tmp_path)  # put back: the next call's plan runs the three failed runs again, the stored one not
    from iolab.campaign import model as campaign
    from iolab.measures.samples import ResultStore
    from iolab.run import plan

    todo = plan.queued(campaign.load(path), ["localhost"], ResultStore(cli.results, NAME)).todo
    assert sorted(entry.run.workload.name for entry in todo) == ["failed", "hung", "never"]
