"""The running run's throughput: hostrun's live.json (iolab.host.live), read by the controller (iolab.drive.live).

Real processes, real /proc counters: a tool paced at a known rate, read while `hostrun run` runs it.
Bounds are wide (±50 %): the rate is for a person watching, and these two cores are shared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from iolab.campaign.hosts import load_inventory
from iolab.drive.live import Watch
from support import PACED, ROOT

MIB = 1 << 20


def _start(run_dir: Path, seconds: float) -> subprocess.Popen:
    argv = [sys.executable, "-m", "iolab.host.hostrun", "run", "--dir", str(run_dir), "--pack", "--"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")}
    return subprocess.Popen(
        [*argv, sys.executable, "-c", PACED, str(seconds)], env=env, stdout=subprocess.PIPE, text=True
    )


def _wait_for(path: Path, timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            figures = json.loads(path.read_text())
            if figures["elapsed_s"] >= 2:  # a whole second of the paced loop behind it
                return figures
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"no live figures in {path} after {timeout} s")


def test_hostrun_shows_what_its_tool_moves_each_second_and_removes_it_at_the_end(tmp_path):
    run_dir = tmp_path / "run"
    proc = _start(run_dir, 6)
    try:
        figures = _wait_for(run_dir / "live.json")
        assert 8 * MIB <= figures["read_Bps"] <= 24 * MIB, figures
        assert 8 * MIB <= figures["write_Bps"] <= 24 * MIB, figures
        assert figures["processes"] >= 1 and figures["cores"] >= 0
    finally:
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert not (run_dir / "live.json").exists() and not run_dir.exists()  # packed, and it was not packed
    assert (
        "live.json"
        not in subprocess.run(
            ["tar", "-tz"], input=__import__("base64").b64decode(out.split("iolab-archive:")[1]), capture_output=True
        ).stdout.decode()
    )


def test_the_controller_adds_up_every_hosts_figures(tmp_path):
    """A local connection's live.json read from the file system; two hosts, each its own run directory."""
    inventory = tmp_path / "inventory.yml"
    hosts = {"h1": {"ansible_connection": "local"}, "h2": {"ansible_connection": "local"}}
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    dirs = {name: tmp_path / name / "run" for name in hosts}
    procs = [_start(path, 6) for path in dirs.values()]
    try:
        with Watch(load_inventory(inventory), list(hosts), {h: str(p) for h, p in dirs.items()}, interval=0.5) as watch:
            for path in dirs.values():
                _wait_for(path / "live.json")
            deadline = time.monotonic() + 10
            while "2 of 2 hosts" not in watch.text() and time.monotonic() < deadline:
                time.sleep(0.2)
            said = watch.text()
        assert said.startswith("now: read ") and "(2 of 2 hosts)" in said, said
        rate = float(said.split("read ")[1].split(" MiB/s")[0])
        assert 16 <= rate <= 48, said  # two hosts at 16 MiB/s each
    finally:
        for proc in procs:
            proc.communicate(timeout=60)
    assert Watch(load_inventory(inventory), list(hosts), {h: str(p) for h, p in dirs.items()}).text() == ""


def test_the_live_table_caption_is_the_campaigns_progress_and_the_runs_throughput_now(tmp_path):
    from rich.console import Console

    from iolab.drive.execute import Lab

    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"h1": {"ansible_connection": "local"}}}}))
    lab = Lab(load_inventory(inventory), ["h1"], Console(), status=lambda: "3 done, 15 left")
    assert lab.caption() == "3 done, 15 left"
    lab.live = lambda: "now: read 2 GiB/s, write 0 B/s, 1.0 cores (1 of 1 host)"
    assert lab.caption() == "3 done, 15 left · now: read 2 GiB/s, write 0 B/s, 1.0 cores (1 of 1 host)"


def test_fio_says_its_own_rate_which_read2_counters_would_miss(tmp_path):
    """fio's libaio reads bypass read(2): live.json takes fio's status line (--eta=always, as bench_fio runs it),
    and before fio's first one (about 2 s in) there is none: the counters then showed 'read 47.9 B/s'."""
    data = tmp_path / "data"
    data.write_bytes(os.urandom(8 * MIB))
    job = ["--name=paced", f"--filename={data}", "--rw=read", "--bs=64k", "--ioengine=libaio", "--direct=0"]
    job += ["--rate=16m", "--time_based", "--runtime=5", f"--output={tmp_path / 'fio.json'}", "--eta=always"]
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "iolab.host.hostrun", "run", "--dir", str(run_dir), "--", "fio", *job]
    proc = subprocess.Popen(argv, env={**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")})
    seen = []
    try:
        while proc.poll() is None:  # every live.json the controller could have read, from the start
            try:
                seen.append(json.loads((run_dir / "live.json").read_text()))
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == 0 and seen
    assert all(f.get("source") == "fio" for f in seen), [f for f in seen if f.get("source") != "fio"][:1]
    assert all(8 * MIB <= f["read_Bps"] <= 24 * MIB and f["iops"] > 0 for f in seen), seen


def test_fios_status_line_is_read_in_its_units():
    from iolab.host.live import tool_status

    line = "Jobs: 2 (f=2): [R(1),W(1)][20.0%][r=1234KiB/s,w=10.5MiB/s][r=308,w=61.4k IOPS][eta 00m:04s]"
    assert tool_status("Jobs: 1 (f=1)\r" + line) == {
        "source": "fio",
        "read_Bps": 1234 * 1024,
        "write_Bps": 10.5 * MIB,
        "iops": 61708,
    }
    assert tool_status("Jobs: 1 (f=1)") is None


def test_the_loaders_step_loop_prints_the_line_live_reads(capsys):
    """run_steps (every iolab loader's loop) says its rate about once a second, in the form tool_status reads."""
    from iolab.host.live import tool_status
    from iolab.host.loader.common import run_steps

    def batches(_epoch):
        for _ in range(12):
            time.sleep(0.1)  # the loader's part
            yield 8

    run_steps(1, 0, batches, lambda batch: (batch, batch * 1000), None, 0.1)  # 0.1 s emulated compute
    said = tool_status(capsys.readouterr().out)
    assert said is not None and said["ranks"] == 1, said
    assert 20 <= said["samples_per_s"] <= 48 and 25 <= said["au_pct"] <= 60, said  # 8 per 0.2 s; half computing
