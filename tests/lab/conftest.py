"""The lab in a box for lab tests: four simulated GPU hosts, up once per session.

    def test_something(sim_hosts):
        sim_hosts.ssh(sim_hosts.hosts[0], "findmnt /mnt/iolab")
        run a playbook with -i sim_hosts.inventory

The hosts share the controller's file system (see iolab.sim): a test that writes
files through them must key paths by host name and clean up after itself.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from iolab import sim

SIM_HOST_COUNT = 4


@dataclasses.dataclass(frozen=True)
class SimLab:
    lab_dir: Path
    inventory: Path
    hosts: list[sim.SimHost]
    up_seconds: float

    def ssh_argv(self, host: sim.SimHost, command: str) -> list[str]:
        """ssh as Ansible does it: the lab key and the lab's control sockets."""
        return [
            "ssh", "-F", "/dev/null", "-i", str(sim.private_key(self.lab_dir)),
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR",
            *sim.ssh_common_args(self.lab_dir),
            f"root@{host.address}", command,
        ]  # fmt: skip

    def ssh(self, host: sim.SimHost, command: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a fixed shell command on a host; never format untrusted values into it."""
        proc = subprocess.run(
            self.ssh_argv(host, command), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{host.name}: {command!r} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc


@pytest.fixture(scope="session")
def sim_hosts() -> Iterator[SimLab]:
    if os.geteuid() != 0:
        pytest.skip("lab tests need root (network namespaces, sshd)")
    if sim.running():
        # One lab per machine: tearing down at the end would take another lab's hosts with it.
        pytest.fail(f"simulated hosts of another lab are up ({', '.join(sim.running())}); "
                    "run `./lab lab.sim-down` first")
    # Short on purpose: ssh control socket paths must fit in 107 bytes.
    lab_dir = Path(tempfile.mkdtemp(prefix="iolab-lab-", dir="/tmp"))
    inventory = lab_dir / "sim.yml"
    try:
        started = time.monotonic()
        hosts = sim.up(SIM_HOST_COUNT, lab_dir, inventory)
        yield SimLab(lab_dir, inventory, hosts, time.monotonic() - started)
    finally:
        sim.down(lab_dir, inventory)
        shutil.rmtree(lab_dir, ignore_errors=True)
