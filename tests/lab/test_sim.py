"""Simulated GPU hosts, for real: namespaces, sshd, SSH, Ansible (root only)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolab import sim
from iolab.errors import UserError

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
MOUNTPOINT = "/mnt/iolab-sim-test"


def _alive(pid: int) -> bool:
    """Gone or a zombie counts as ended (PID 1 here may reap late)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _mount_namespaces_in_use() -> set[str]:
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _alive(int(entry.name)):
            try:
                found.add(os.readlink(f"/proc/{entry.name}/ns/mnt"))
            except OSError:
                pass
    return found


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _alive(int(entry.name)):
            try:
                if text.encode() in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _links() -> list[str]:
    out = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=True).stdout
    return [link["ifname"] for link in json.loads(out)]


def test_each_host_answers_ssh_with_its_own_name(sim_hosts):
    print(f"\nsim.up of {len(sim_hosts.hosts)} hosts: {sim_hosts.up_seconds:.2f} s")
    assert [h.name for h in sim_hosts.hosts] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    for host in sim_hosts.hosts:
        answer = sim_hosts.ssh(host, "hostname; ip -4 -o addr show dev eth0").stdout.splitlines()
        assert host.name in answer, answer
        assert f" {host.address}/24 " in answer[-1]


def test_names_resolve_in_hosts_without_the_resolver_stall(sim_hosts):
    gpu01 = sim_hosts.hosts[0]
    assert sim_hosts.ssh(gpu01, "getent hosts gpu04").stdout.split()[:2] == ["10.77.0.14", "gpu04"]
    started = time.monotonic()
    proc = sim_hosts.ssh(gpu01, "getent hosts no-such-host.invalid", check=False)
    elapsed = time.monotonic() - started
    assert proc.returncode == 2  # not found
    assert elapsed < 5, f"an unknown name took {elapsed:.1f} s: the namespace reaches for a resolver"


def test_mounts_are_private_to_each_host(sim_hosts):
    gpu01, gpu02 = sim_hosts.hosts[:2]
    sim_hosts.ssh(gpu01, f"mkdir -p {MOUNTPOINT} && mount -t tmpfs -o size=1m iolab-sim-test {MOUNTPOINT}")
    try:
        sim_hosts.ssh(gpu01, f"touch {MOUNTPOINT}/only-on-gpu01")
        assert sim_hosts.ssh(gpu01, f"findmnt -n -o FSTYPE {MOUNTPOINT}").stdout.strip() == "tmpfs"
        assert sim_hosts.ssh(gpu02, f"findmnt {MOUNTPOINT}", check=False).returncode == 1
        assert sim_hosts.ssh(gpu02, f"test -e {MOUNTPOINT}/only-on-gpu01", check=False).returncode == 1
        assert not os.path.ismount(MOUNTPOINT)
        assert not os.path.exists(f"{MOUNTPOINT}/only-on-gpu01")
    finally:
        sim_hosts.ssh(gpu01, f"umount {MOUNTPOINT}", check=False)
        os.rmdir(MOUNTPOINT)  # the directory itself is on the shared root file system
    assert sim_hosts.ssh(gpu01, f"findmnt {MOUNTPOINT}", check=False).returncode == 1


def test_ansible_reaches_every_host(sim_hosts):
    venv_bin = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    env.setdefault("LC_ALL", "C.UTF-8")  # ansible-core refuses a non-UTF-8 locale
    # Machine-readable results, whatever ansible.cfg chooses for people.
    env.update(ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    started = time.monotonic()
    proc = subprocess.run(
        [str(venv_bin / "ansible"), "-i", str(sim_hosts.inventory), "gpu", "-m", "ansible.builtin.ping"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=120,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    print(f"\nansible ping of {len(sim_hosts.hosts)} hosts: {elapsed:.2f} s")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # ad hoc output: "gpu01 | SUCCESS => {json}" per host
    parts = re.split(r"^(\S+) \| (\w+) => ", proc.stdout, flags=re.MULTILINE)[1:]
    results = {name: (state, json.loads(body)) for name, state, body in zip(*[iter(parts)] * 3)}
    assert {name: (state, result["ping"]) for name, (state, result) in results.items()} == {
        h.name: ("SUCCESS", "pong") for h in sim_hosts.hosts
    }


def test_up_again_changes_nothing_and_is_fast(sim_hosts):
    before = {s.host.name: s.sshd_pid for s in sim.status(sim_hosts.lab_dir)}
    assert all(before.values()) and len(before) == 4
    inventory_stat = sim_hosts.inventory.stat()

    started = time.monotonic()
    hosts = sim.up(4, sim_hosts.lab_dir, sim_hosts.inventory)
    elapsed = time.monotonic() - started
    print(f"\nsim.up again (4 hosts up): {elapsed:.2f} s")

    assert hosts == sim_hosts.hosts
    assert {s.host.name: s.sshd_pid for s in sim.status(sim_hosts.lab_dir)} == before
    assert sim_hosts.inventory.stat().st_mtime_ns == inventory_stat.st_mtime_ns
    assert elapsed < 5
    with pytest.raises(UserError, match="lab.sim-down first to shrink"):
        sim.up(2, sim_hosts.lab_dir, sim_hosts.inventory)


def test_down_leaves_nothing_and_up_grows_the_lab_back(sim_hosts):
    lab_dir, inventory = sim_hosts.lab_dir, sim_hosts.inventory
    sim_hosts.ssh(sim_hosts.hosts[0], "true")  # leaves a ControlPersist master for down to close
    pids = [s.sshd_pid for s in sim.status(lab_dir)]
    host_mount_namespaces = {os.readlink(f"/proc/{pid}/ns/mnt") for pid in pids}
    assert len(host_mount_namespaces) == 4

    started = time.monotonic()
    sim.down(lab_dir, inventory)
    print(f"\nsim.down of 4 hosts: {time.monotonic() - started:.2f} s")

    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert "iolab-" not in netns
    assert not [link for link in _links() if link.startswith(("iolab0", "iolabv-"))]
    assert not [pid for pid in pids if _alive(pid)]
    assert not host_mount_namespaces & _mount_namespaces_in_use()
    assert not list(Path("/etc").glob("netns/iolab-*"))
    assert not inventory.exists()
    assert not (lab_dir / "cp").exists()
    assert not _processes_mentioning(f"{lab_dir}/cp/")  # ssh control masters
    assert sim.status(lab_dir) == []
    sim.down(lab_dir, inventory)  # idempotent

    # Restore the session's four hosts for the other lab tests, growing 2 -> 4 on
    # the way: the running hosts must learn the new names.
    sim.up(2, lab_dir, inventory)
    assert sim.up(4, lab_dir, inventory) == sim_hosts.hosts
    assert sim_hosts.ssh(sim_hosts.hosts[0], "getent hosts gpu04").stdout.split()[:2] == ["10.77.0.14", "gpu04"]
    assert [s.up for s in sim.status(lab_dir)] == [True] * 4


@pytest.mark.parametrize(
    ("count", "lab_dir", "message"),
    [
        (0, "/tmp/lab", "between 1 and 99"),
        (100, "/tmp/lab", "between 1 and 99"),
        (4, "/tmp/a lab", "characters sshd and ssh would misread"),
        (4, "/tmp/" + "x" * 60, "too long for ssh control sockets"),
    ],
)
def test_up_refuses_bad_arguments_before_changing_anything(tmp_path, count, lab_dir, message):
    with pytest.raises(UserError, match=message):
        sim.up(count, Path(lab_dir), tmp_path / "sim.yml")
    assert not Path(lab_dir).exists()


def test_up_and_down_say_they_need_root(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(UserError, match="lab.sim-up needs root .* run it as root"):
        sim.up(4, Path("/tmp/iolab-no-root"), tmp_path / "sim.yml")
    with pytest.raises(UserError, match="lab.sim-down needs root"):
        sim.down(Path("/tmp/iolab-no-root"), tmp_path / "sim.yml")
    assert not Path("/tmp/iolab-no-root").exists()
