"""Simulated GPU hosts, for real: namespaces, sshd, SSH, Ansible (root only)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolab import sim
from iolab.errors import UserError
from iolab.shared.processes import alive

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
MOUNTPOINT = "/mnt/iolab-sim-test"


def _mount_namespaces_in_use() -> set[str]:
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and alive(int(entry.name)):
            try:
                found.add(os.readlink(f"/proc/{entry.name}/ns/mnt"))
            except OSError:
                pass
    return found


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and alive(int(entry.name)):
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
        assert host.address.startswith(f"10.77.{sim_hosts.subnet}.")


def test_names_resolve_in_hosts_without_the_resolver_stall(sim_hosts):
    gpu01 = sim_hosts.hosts[0]
    assert sim_hosts.ssh(gpu01, "getent hosts gpu04").stdout.split()[:2] == [sim_hosts.hosts[3].address, "gpu04"]
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
    results = {name: (state, json.loads(body)) for name, state, body in zip(*[iter(parts)] * 3, strict=False)}
    assert {name: (state, result["ping"]) for name, (state, result) in results.items()} == {
        h.name: ("SUCCESS", "pong") for h in sim_hosts.hosts
    }


def test_up_again_changes_nothing_and_is_fast(sim_hosts):
    before = {s.host.name: s.sshd_pid for s in sim.status(sim_hosts.lab)}
    assert all(before.values()) and len(before) == 4
    inventory_stat = sim_hosts.inventory.stat()

    started = time.monotonic()
    hosts = sim.up(4, sim_hosts.lab)
    elapsed = time.monotonic() - started
    print(f"\nsim.up again (4 hosts up): {elapsed:.2f} s")

    assert hosts == sim_hosts.hosts
    assert {s.host.name: s.sshd_pid for s in sim.status(sim_hosts.lab)} == before
    assert sim_hosts.inventory.stat().st_mtime_ns == inventory_stat.st_mtime_ns
    assert elapsed < 5
    with pytest.raises(UserError, match="lab.sim-down first to shrink"):
        sim.up(2, sim_hosts.lab)


def test_down_leaves_nothing_and_up_grows_the_lab_back(sim_hosts):
    lab, inventory = sim_hosts.lab, sim_hosts.inventory
    lab_dir = lab.dir
    sim_hosts.ssh(sim_hosts.hosts[0], "true")  # leaves a ControlPersist master for down to close
    pids = [s.sshd_pid for s in sim.status(lab)]
    host_mount_namespaces = {os.readlink(f"/proc/{pid}/ns/mnt") for pid in pids}
    assert len(host_mount_namespaces) == 4

    started = time.monotonic()
    assert sim.down(lab)
    print(f"\nsim.down of 4 hosts: {time.monotonic() - started:.2f} s")

    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert f"iolab-{lab.name}-" not in netns
    assert not [link for link in _links() if link == lab.bridge or link.startswith(f"v{lab.name}-")]
    assert not [pid for pid in pids if alive(pid)]
    assert not host_mount_namespaces & _mount_namespaces_in_use()
    assert not list(Path("/etc").glob(f"netns/iolab-{lab.name}-*"))
    assert lab.name not in sim.labs()
    assert not inventory.exists()
    assert not (lab_dir / "cp").exists()
    assert not _processes_mentioning(f"{lab_dir}/cp/")  # ssh control masters
    assert sim.status(lab) == []
    assert sim.down(lab) is False  # not up: says so, changes nothing

    # Restore the session's four hosts for the other lab tests, growing 2 -> 4 on
    # the way: the running hosts must learn the new names.
    sim.up(2, lab)
    assert sim.up(4, lab) == sim_hosts.hosts
    assert sim_hosts.ssh(sim_hosts.hosts[0], "getent hosts gpu04").stdout.split()[:2] == [
        sim_hosts.hosts[3].address,
        "gpu04",
    ]
    assert [s.up for s in sim.status(lab)] == [True] * 4


def test_two_more_labs_come_up_beside_this_one_and_each_down_removes_only_its_own(sim_hosts, temporary_lab):
    """Labs a and b (as two checkouts would make) beside the session's: own bridge, subnet, hosts."""
    a, b = temporary_lab("a"), temporary_lab("b")
    # The controller's benchmark mount as lab a comes up (a localhost campaign's, running then): the new host's
    # mount namespace, a copy of the controller's, is left without it (sshd.drop_copied_mounts).
    copied = Path(f"/mnt/iolab/itest-copy-{os.getpid()}")
    copied.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(copied)], check=True)
    try:
        try:
            hosts_a = sim.up(1, a)
            (sshd,) = [s.sshd_pid for s in sim.status(a)]
            assert str(copied) not in Path(f"/proc/{sshd}/mountinfo").read_text()
        finally:
            subprocess.run(["umount", str(copied)], check=True)
            copied.rmdir()
        hosts_b = sim.up(2, b)
        subnets = {sim.subnet_of(lab) for lab in (sim_hosts.lab, a, b)}
        assert len(subnets) == 3, "two labs share a subnet"
        assert len({sim_hosts.lab.bridge, a.bridge, b.bridge} & set(_links())) == 3
        # Same inventory names, different hosts: each answers at its own lab's address.
        assert [h.name for h in hosts_a] == ["gpu01"] and [h.name for h in hosts_b] == ["gpu01", "gpu02"]
        assert len({hosts_a[0].address, hosts_b[0].address, sim_hosts.hosts[0].address}) == 3
        for lab, host in ((a, hosts_a[0]), (b, hosts_b[1])):
            argv = sim_hosts.ssh_argv(host, "hostname")
            argv[argv.index("-i") + 1] = str(sim.private_key(lab.dir))
            argv = [arg.replace(str(sim.control_dir(sim_hosts.lab_dir)), str(sim.control_dir(lab.dir))) for arg in argv]
            assert subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip() == host.name
        with pytest.raises(UserError, match=f"lab {a.name} is up from {a.dir}"):
            sim.up(1, dataclasses.replace(a, dir=b.dir))  # a lab name is one lab's, not two directories'
        before = {s.host.name: s.sshd_pid for s in sim.status(sim_hosts.lab)}

        assert sim.down(a)
        assert a.name not in sim.labs() and a.bridge not in _links()
        assert sim.status(a) == [] and not a.inventory.exists()
        assert [s.up for s in sim.status(b)] == [True, True]
        assert {s.host.name: s.sshd_pid for s in sim.status(sim_hosts.lab)} == before
        sim_hosts.ssh(sim_hosts.hosts[3], "true")
        assert sim.down(a) is False
    finally:
        for lab in (a, b):
            sim.down(lab)
            shutil.rmtree(lab.dir, ignore_errors=True)
    assert not {a.name, b.name} & set(sim.labs())
    assert sim_hosts.lab.name in sim.labs()


def test_sim_down_of_a_lab_that_is_not_up_says_so(tmp_path):
    env = {**os.environ, "IOLAB_LAB": "none0"}
    done = subprocess.run(
        [sys.executable, "-m", "invoke", "lab.sim-down"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "lab none0 is not up: nothing to take down" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "invoke", "lab.sim-down", "--lab", "No-Way"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "must be 1 to 8 lower-case letters or digits" in bad.stderr
    assert "Traceback" not in bad.stderr


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
        sim.up(count, sim.Lab("bad", Path(lab_dir), tmp_path / "sim.yml"))
    assert not Path(lab_dir).exists()
    assert "bad" not in sim.labs()


def test_up_and_down_say_they_need_root(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    lab = sim.Lab("noroot", Path("/tmp/iolab-no-root"), tmp_path / "sim.yml")
    with pytest.raises(UserError, match="lab.sim-up needs root .* run it as root"):
        sim.up(4, lab)
    with pytest.raises(UserError, match="lab.sim-down needs root"):
        sim.down(lab)
    assert not Path("/tmp/iolab-no-root").exists()


def test_the_checkout_lab_is_named_from_its_path_unless_told(monkeypatch):
    monkeypatch.delenv("IOLAB_LAB", raising=False)
    own = sim.for_checkout()
    assert own.name == sim.for_checkout().name and len(own.name) == 6
    assert own.inventory == REPO / "inventory" / "sim.yml" and own.dir == REPO / ".lab" / "sim" / own.name
    monkeypatch.setenv("IOLAB_LAB", "b2")
    assert sim.for_checkout().name == "b2" and sim.for_checkout().inventory.name == "sim-b2.yml"
    assert sim.for_checkout("c3").name == "c3"
