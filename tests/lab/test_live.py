"""The running run's throughput comes from simulated hosts over SFTP (drive.live), while a real tool runs there."""

from __future__ import annotations

import os
import shlex
import subprocess
import time

import pytest

from iolab.campaign.hosts import load_inventory
from iolab.drive.live import Watch
from support import PACED, ROOT

pytestmark = pytest.mark.lab


def test_the_live_line_adds_up_two_simulated_hosts_read_over_sftp(sim_hosts, tmp_path):
    names = [h.name for h in sim_hosts.hosts[:2]]
    run_dirs = {name: f"/opt/iolab/runs/live-{os.getpid()}/{name}/run-1" for name in names}
    pyfiles = ROOT / "pyfiles"
    started = []
    try:
        for simhost in sim_hosts.hosts[:2]:
            command = shlex.join(
                ["env", f"PYTHONPATH={pyfiles}", "python3", "-m", "iolab.host.hostrun", "run"]
                + ["--dir", run_dirs[simhost.name], "--", "python3", "-c", PACED, "8"]
            )
            started.append(subprocess.Popen(sim_hosts.ssh_argv(simhost, command), stdout=subprocess.DEVNULL))
        inventory = load_inventory(sim_hosts.inventory)
        with Watch(inventory, names, run_dirs, interval=0.5) as watch:
            deadline, said = time.monotonic() + 20, ""
            while "(2 of 2 hosts)" not in said and time.monotonic() < deadline:
                time.sleep(0.25)
                said = watch.text()
        assert "(2 of 2 hosts)" in said, said
        rate = float(said.split("read ")[1].split(" MiB/s")[0])
        assert 16 <= rate <= 48, said  # two hosts at 16 MiB/s each
    finally:
        for proc in started:
            proc.wait(timeout=60)
        subprocess.run(["rm", "-rf", f"/opt/iolab/runs/live-{os.getpid()}"], check=False)
