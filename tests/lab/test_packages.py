"""The iolab_host role's package installs on simulated hosts, for real (root only).

Simulated hosts share the controller's root file system and dpkg database and have no
route to a package mirror. With `iolab_host_shared_root` (which lab.sim-up's inventory
sets) the role installs what they miss once, from the controller; without it, a host
without a route fails in seconds with one line naming it and the packages.

The package is Debian's `hello` (53 kB, depends on libc only): test (a) installs it
from the mirror and purges it again; both tests are skipped where it is already
installed, so that nothing of the machine's is removed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from iolab import paths

pytestmark = pytest.mark.lab

PACKAGE = "hello"
ARCHIVES = Path("/var/cache/apt/archives")
APT_LISTS = Path("/var/lib/apt/lists")
APT_STAMP = Path("/var/lib/apt/periodic/update-success-stamp")
# Measured: this playbook on two simulated hosts without a route fails after 12-15 s
# (668 s before apt's retries and timeouts were bounded: the second host waited for the
# first's lock); the margin is for a loaded machine.
NO_ROUTE_LIMIT_S = 60

PLAYBOOK = f"""
- name: Install a package the way the roles do
  hosts: gpu
  gather_facts: false
  tasks:
    - name: Install the test package
      ansible.builtin.include_role:
        name: iolab_host
        tasks_from: packages
      vars:
        iolab_host_pkg_role: iolab_host
        iolab_host_pkg_names: [{PACKAGE}]
        iolab_host_pkg_install: true
        iolab_host_pkg_switch: iolab_pkgtest_install
        iolab_host_pkg_purpose: ""
"""


def installed(package: str) -> bool:
    out = subprocess.run(
        ["dpkg-query", "--show", "--showformat=${db:Status-Abbrev}", package], capture_output=True, text=True
    ).stdout
    return out.startswith("ii")


@pytest.fixture
def package_absent() -> Iterator[str]:
    """The test package, not installed; afterwards purged again if a test installed it."""
    if not shutil.which("dpkg-query") or not shutil.which("apt-get"):
        pytest.skip("needs a Debian-family controller")
    if installed(PACKAGE):
        pytest.skip(f"{PACKAGE} is installed on this machine already; these tests must not remove it")
    cached = set(ARCHIVES.glob(f"{PACKAGE}_*.deb"))
    try:
        yield PACKAGE
    finally:
        if installed(PACKAGE):
            subprocess.run(
                ["apt-get", "purge", "-y", "-q", PACKAGE],
                capture_output=True,
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                timeout=300,
                check=False,
            )
        for deb in set(ARCHIVES.glob(f"{PACKAGE}_*.deb")) - cached:  # what a test downloaded
            deb.unlink(missing_ok=True)
        assert not installed(PACKAGE), f"{PACKAGE} could not be purged again"


def run_playbook(inventory: Path, hosts: list[str]) -> tuple[int, list[dict], float]:
    """ansible-runner on the playbook above: its rc, its events and its seconds."""
    import ansible_runner

    private = Path(tempfile.mkdtemp(prefix="iolab-pkgtest-"))
    try:
        (private / "project").mkdir()
        (private / "project" / "packages.yml").write_text(PLAYBOOK)
        events: list[dict] = []
        started = time.monotonic()
        runner = ansible_runner.run(
            private_data_dir=str(private),
            playbook="packages.yml",
            inventory=str(inventory),
            limit=",".join(hosts),
            envvars={
                "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
                "ANSIBLE_CONFIG": str(paths.ANSIBLE_CFG),
                "ANSIBLE_ROLES_PATH": str(paths.ROLES),
                "ANSIBLE_NOCOLOR": "1",
            },
            quiet=True,
            event_handler=lambda event: events.append(event) or False,
            settings={"suppress_ansible_output": True},
            suppress_env_files=True,
            timeout=600,
        )
        return runner.rc, events, time.monotonic() - started
    finally:
        shutil.rmtree(private, ignore_errors=True)


def task_events(events: list[dict], kinds: tuple[str, ...] = ("runner_on_ok", "runner_on_failed")) -> list[dict]:
    """The event data of the tasks that ran (not skipped) on some host."""
    return [e["event_data"] for e in events if e.get("event") in kinds]


def delegated_to(data: dict) -> str | None:
    """Where a delegated task ran (its result's _ansible_delegated_vars); None: on its host."""
    return (data.get("res", {}).get("_ansible_delegated_vars") or {}).get("ansible_host")


def package_tasks(events: list[dict]) -> list[dict]:
    """The tasks that ran apt or the package module (the lists refresh, the install)."""
    return [
        d for d in task_events(events) if d.get("task_action") in ("ansible.builtin.apt", "ansible.builtin.package")
    ]


def test_hosts_sharing_the_root_get_their_package_once_from_the_controller(sim_hosts, package_absent):
    inventory = yaml.safe_load(sim_hosts.inventory.read_text())
    assert inventory["all"]["children"]["gpu"]["vars"]["iolab_host_shared_root"] is True
    hosts = ["gpu01", "gpu02"]

    rc, events, seconds = run_playbook(sim_hosts.inventory, hosts)
    print(f"\ninstall of {package_absent} for {hosts} through the controller: {seconds:.1f} s")
    failures = [d.get("res", {}).get("msg") for d in task_events(events, ("runner_on_failed",))]
    assert rc == 0, failures

    ran = package_tasks(events)
    installs = [d for d in ran if d["task"] == "Install the missing packages"]
    assert len(installs) == 1, [(d["task"], d["host"]) for d in ran]
    assert delegated_to(installs[0]) == "localhost"
    assert installs[0]["res"]["changed"] is True
    # Neither the lists refresh nor the install ran on a simulated host itself.
    assert all(delegated_to(d) == "localhost" for d in ran), [(d["task"], d["host"], delegated_to(d)) for d in ran]
    assert installed(package_absent)
    for host in sim_hosts.hosts[:2]:  # they see it: it is their root file system too
        answer = sim_hosts.ssh(host, "dpkg-query --show --showformat='${db:Status-Abbrev}' " + PACKAGE).stdout
        assert answer.startswith("ii"), (host.name, answer)

    # Installed now: a second run finds nothing missing and runs no package manager at all.
    rc, events, seconds = run_playbook(sim_hosts.inventory, hosts)
    assert rc == 0
    assert package_tasks(events) == []
    print(f"second run, nothing to install: {seconds:.1f} s")


@pytest.fixture(params=["lists-fresh", "lists-stale"])
def apt_lists(request) -> Iterator[str]:
    """apt's package lists made to look refreshed a minute ago, or two hours ago, and their times restored
    afterwards. The role refreshes lists over an hour old: without a route to the mirror, a host then fails
    at the refresh, and with fresh lists at the download of the package; each must say so in one line."""
    marks = [mark for mark in (APT_STAMP, APT_LISTS) if mark.exists()]  # apt's module reads the first there is
    before = {mark: mark.stat() for mark in marks}
    when = time.time() - (60 if request.param == "lists-fresh" else 7200)
    for mark in marks:
        os.utime(mark, (when, when))
    try:
        yield request.param
    finally:
        for mark, stat in before.items():
            os.utime(mark, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_host_without_a_route_to_the_mirror_fails_in_seconds(sim_hosts, package_absent, apt_lists, tmp_path):
    # A real inventory: no iolab_host_shared_root, so each host installs on itself.
    inventory = yaml.safe_load(sim_hosts.inventory.read_text())
    inventory["all"]["children"]["gpu"]["vars"].pop("iolab_host_shared_root")
    real = tmp_path / "real.yml"
    real.write_text(yaml.safe_dump(inventory))
    hosts = ["gpu01", "gpu02"]
    # A .deb of the package in apt's cache would install without a mirror: set it aside.
    aside = tmp_path / "archives"
    aside.mkdir()
    cached = list(ARCHIVES.glob(f"{package_absent}_*.deb"))
    for deb in cached:
        shutil.move(deb, aside / deb.name)
    try:
        rc, events, seconds = run_playbook(real, hosts)
    finally:
        for deb in cached:
            shutil.move(aside / deb.name, deb)
    print(f"\n{hosts} without a route to the mirror failed after {seconds:.1f} s")

    assert rc != 0
    assert seconds <= NO_ROUTE_LIMIT_S
    ran = package_tasks(events)
    assert ran and all(delegated_to(d) is None for d in ran)  # each host tried on itself
    failed = task_events(events, ("runner_on_failed",))
    said = {
        d["host"]: d["res"]["msg"] for d in failed if d["task"] == "Say what failed, and where the packages come from"
    }
    assert sorted(said) == hosts, [(d["task"], d["host"], d["res"].get("msg")) for d in failed]
    for host, msg in said.items():
        assert "\n" not in msg
        assert msg.startswith(f"{host}: installing {package_absent} failed ("), msg
        assert "can it reach its package mirror?" in msg, msg
        assert ("apt cache" in msg) == (apt_lists == "lists-stale"), msg  # where it failed: refresh or download
    assert not installed(package_absent)
