"""Host leases on simulated hosts: one campaign at a time per host, stale leases, --steal (root only)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from iolab.drive import lease
from iolab.errors import UserError
from iolab.run import cli as cli_mod
from support import ROOT, tmpfs_campaign

pytestmark = pytest.mark.lab

MINE = ("campaign mine", "campaign ghost")
FIO = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "2s", "ramp": "0s", "size": "16MiB"}


def records(host_pid: int | None = None) -> list[dict]:
    """The lease records under the host directory (shared by every simulated host)."""
    found = [json.loads(path.read_text()) for path in record_files()]
    return [r for r in found if host_pid is None or r["holder_pid"] == host_pid]


def record_files() -> list[Path]:
    directory = Path(lease.LEASE_DIR)
    return sorted(directory.glob("*.json")) if directory.is_dir() else []


def test_two_campaigns_at_once_on_one_host_the_second_stops_in_one_line(sim_hosts, cli, tmp_path):
    argvs = {}
    for name in ("lease-a", "lease-b"):
        path = tmpfs_campaign(tmp_path, name, [FIO])
        argvs[name] = cli.argv(
            "bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu04", "--campaign", str(path)
        )
    procs = {
        name: subprocess.Popen(argv, cwd=ROOT, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, argv in argvs.items()
    }
    done = {name: (proc.wait(timeout=300), *proc.communicate()) for name, proc in procs.items()}
    (winner,) = [name for name, (rc, _, _) in done.items() if rc == 0]
    (loser,) = [name for name in done if name != winner]
    rc, _, err = done[loser]
    assert rc == 2
    assert err.strip().splitlines() == [err.strip()]  # one line
    assert err.startswith(f"iolab: gpu04 is held by campaign {winner} since ")
    assert "--steal" in err and "Traceback" not in err
    assert not (cli.results / loser).exists()  # stopped before any work
    samples = cli.samples(winner)
    assert {s["host"] for s in samples if s["metric"] == "read_bw"} == {"gpu04", "*"}
    assert [r["status"] for r in cli.runs(winner)] == ["ok"]
    assert not [r for r in records() if r["held_for"] == f"campaign {winner}"]  # released at the end


def _lab(sim_hosts, host: str):
    return cli_mod.lab(str(sim_hosts.inventory), host)


def _ghost(sim_hosts, host: str, **record) -> lease.Holder:
    """A holder whose campaign record says `record`: it holds the host until its stdin closes."""
    lab = _lab(sim_hosts, host)
    holder = lease.Holder(host, lab.inventory.hostvars[host], {**lease.record("campaign ghost"), **record}).answer()
    assert holder.state == "held", holder.detail
    return holder


def test_a_lease_is_released_with_its_campaign_and_a_crashed_holder_is_taken_over(sim_hosts):
    lab = _lab(sim_hosts, "gpu03")
    with lease.held(lab, "campaign first"):
        (mine,) = [r for r in records() if r["held_for"] == "campaign first"]
        with pytest.raises(
            UserError,
            match=r"^gpu03 is held by campaign first since .* from "
            rf"\w+@.*:{ROOT} \(PID {os.getpid()}\); wait for it to end",
        ):
            with lease.held(lab, "campaign second"):
                pass
    assert records(mine["holder_pid"]) == []  # released: its record is gone

    holder = _ghost(sim_hosts, "gpu03")
    os.kill(_holder_pid("campaign ghost"), signal.SIGKILL)  # a holder that crashed
    holder.proc.wait(timeout=10)
    lab.console.begin_capture()
    with lease.held(lab, "campaign third"):
        pass
    said = lab.console.end_capture()
    assert "the lease of campaign ghost" in said and "taken over" in said


def _holder_pid(campaign: str) -> int:
    (record,) = [r for r in records() if r["held_for"] == campaign]
    return record["holder_pid"]


def test_steal_takes_only_a_lease_whose_campaign_is_gone(sim_hosts):
    lab = _lab(sim_hosts, "gpu02")
    ended = subprocess.Popen(["true"])
    ended.wait()  # its campaign's process is gone
    gone = _ghost(sim_hosts, "gpu02", pid=ended.pid)
    try:
        with pytest.raises(UserError, match="gpu02 is held by campaign ghost .* pass --steal"):
            with lease.held(lab, "campaign mine"):
                pass
        lab.console.begin_capture()
        with lease.held(lab, "campaign mine", steal=True):
            assert [r["held_for"] for r in records() if r["held_for"] in MINE] == ["campaign mine"]
        assert "has ended" in lab.console.end_capture()
        assert gone.proc.wait(timeout=10) is not None  # the orphan was ended on the host
    finally:
        gone.release()

    alive = _ghost(sim_hosts, "gpu02")  # this test's own PID: alive
    try:
        with pytest.raises(UserError, match="--steal refused: gpu02 is held .*: that process still runs"):
            with lease.held(lab, "campaign mine", steal=True):
                pass
        assert alive.proc.poll() is None
    finally:
        alive.release()
    assert not [r for r in records() if r["held_for"] in MINE]


def test_sigterm_releases_the_lease_after_teardown(sim_hosts, cli, tmp_path):
    path = tmpfs_campaign(tmp_path, "lease-term", [FIO], repetitions=3)
    argv = cli.argv("bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu01", "--campaign", str(path))
    proc = subprocess.Popen(argv, cwd=ROOT, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not [r for r in records() if r["held_for"] == "campaign lease-term"] and time.monotonic() < deadline:
        time.sleep(0.1)
    (held,) = [r for r in records() if r["held_for"] == "campaign lease-term"]
    time.sleep(3)  # into the campaign's work
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert records(held["holder_pid"]) == []
    with lease.held(_lab(sim_hosts, "gpu01"), "campaign mine"):  # free again
        pass


def test_a_damaged_lease_record_refuses_a_second_campaign_and_leaves_the_first_intact(sim_hosts, cli, tmp_path):
    """The second campaign's holder crashed on the record, and the campaign ran anyway ("no lease taken")."""
    argvs = {}
    for name, runtime in (("lease-dmg-a", "12s"), ("lease-dmg-b", "2s")):
        path = tmpfs_campaign(tmp_path, name, [{**FIO, "runtime": runtime}])
        argvs[name] = cli.argv(
            "bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu03", "--campaign", str(path)
        )
    first = subprocess.Popen(
        argvs["lease-dmg-a"], cwd=ROOT, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not [r for r in records() if r["held_for"] == "campaign lease-dmg-a"] and time.monotonic() < deadline:
        time.sleep(0.1)
    (held,) = [p for p in record_files() if json.loads(p.read_text())["held_for"] == "campaign lease-dmg-a"]
    held.write_text(json.dumps({"holder_pid": "x"}))
    started = time.monotonic()
    second = subprocess.run(argvs["lease-dmg-b"], cwd=ROOT, env=cli.env, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    assert second.returncode == 2, second.stderr
    err = second.stderr.strip()
    assert err.splitlines() == [err] and "Traceback" not in err
    assert err.startswith("iolab: gpu03: no lease taken, so nothing was run: the lease record ") and "damaged" in err
    assert not (cli.results / "lease-dmg-b").exists()
    assert first.poll() is None  # the first still runs, alone
    _, err = first.communicate(timeout=180)
    assert first.returncode == 0, err
    assert [r["status"] for r in cli.runs("lease-dmg-a")] == ["ok"]
    assert sim_hosts.mounts_left() == {}
