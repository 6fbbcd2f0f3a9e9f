"""Simulated GPU hosts for tests: a lab of their own (network namespaces with their own sshd, iolab.sim).

    def test_something(sim_hosts):
        sim_hosts.ssh(sim_hosts.hosts[0], "findmnt /mnt/iolab")
        run a playbook with -i sim_hosts.inventory

The hosts share the controller's file system (see iolab.sim): a test that writes
files through them must key paths by host name and clean up after itself. The session's
lab (fixture `sim_hosts`, tests/conftest.py) is up once for every test that asks for it.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
from pathlib import Path

from iolab import sim

SIM_HOST_COUNT = 4


@dataclasses.dataclass(frozen=True)
class SimLab:
    lab: sim.Lab
    hosts: list[sim.SimHost]
    up_seconds: float

    @property
    def lab_dir(self) -> Path:
        return self.lab.dir

    @property
    def inventory(self) -> Path:
        return self.lab.inventory

    @property
    def subnet(self) -> int:
        return sim.subnet_of(self.lab)

    @property
    def controller(self) -> str:
        """The controller's address on the lab's bridge (lab services bind there)."""
        return sim.controller_address(self.subnet)

    def ssh_argv(self, host: sim.SimHost, command: str) -> list[str]:
        """ssh as Ansible does it: the lab key and the lab's control sockets."""
        return [
            "ssh", "-F", "/dev/null", "-i", str(sim.private_key(self.lab_dir)),
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR",
            *sim.ssh_common_args(self.lab_dir),
            f"root@{host.address}", command,
        ]  # fmt: skip

    def mounts_left(self) -> dict[str, str]:
        """What of the tests' backends (itest-*) is still mounted on each host (nothing, after a campaign).

        Only those: the hosts' namespaces hold nothing else under /mnt/iolab (`sim.up` detaches the copies of
        the controller's mounts a new host starts with: sshd.drop_copied_mounts).
        """
        found = {}
        for host in self.hosts:
            out = self.ssh(host, "findmnt -rn -o TARGET | grep ^/mnt/iolab/itest || true").stdout.strip()
            if out:
                found[host.name] = out
        return found

    def ssh(self, host: sim.SimHost, command: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a fixed shell command on a host; never format untrusted values into it."""
        proc = subprocess.run(
            self.ssh_argv(host, command), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{host.name}: {command!r} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc


def temporary_lab(prefix: str) -> sim.Lab:
    """A lab named `prefix` + this process's ID, its files in a fresh directory under /tmp.

    Short on purpose: ssh control socket paths must fit in 107 bytes.
    """
    lab_dir = Path(tempfile.mkdtemp(prefix="iolab-lab-", dir="/tmp"))
    return sim.Lab(name=f"{prefix}{os.getpid()}"[:8], dir=lab_dir, inventory=lab_dir / "sim.yml")
