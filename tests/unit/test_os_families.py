"""The roles on each OS family: which modules, commands and package names a host of each OS gets.

Debian 12 is this machine and is tested for real by the integration and lab tests. Ubuntu
22.04/24.04 and RHEL/Rocky 9 cannot run here, so tests/fixtures/os_facts/roles_check.yml runs
every role's package tasks in check mode with their facts (tests/fixtures/os_facts/*.json,
taken as the host's by the test-only fixture_facts module). The package action's apt and dnf
are stubs there (library/): this machine cannot run dnf, nor install Ubuntu's packages. All
else is real Ansible: the OS check, include_vars and first_found, the queries, the when
conditions that keep Debian-only modules off other hosts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "os_facts"
DEBIAN_ONLY_MODULES = {"apt", "apt_key", "apt_repository", "deb822_repository", "dpkg_selections"}
DEBIAN_ONLY_COMMANDS = {"dpkg", "dpkg-query", "apt", "apt-get", "apt-cache"}
SUPPORTED = "iolab runs on Debian 12, Ubuntu 22.04/24.04, RHEL/Rocky 9"
WITHOUT_GANESHA = "rocky-9-without-nfs-ganesha"  # Rocky 9 whose repositories lack nfs-ganesha, as is usual


@pytest.fixture(scope="module")
def check_roles(tmp_path_factory):
    """roles_check.yml in check mode, once, on one host per facts file (all on this machine, in parallel).

    Returns a function: the OS's name (a facts file's) → (its failed tasks' messages, the tasks that ran, in order).
    """
    tmp_path = tmp_path_factory.mktemp("os")
    record = tmp_path / "tasks.jsonl"
    hosts = {
        path.stem: {
            "os_facts_file": str(path),
            "ansible_connection": "local",
            "ansible_python_interpreter": "/usr/bin/python3",
        }
        for path in FIXTURES.glob("*.json")
    }
    hosts[WITHOUT_GANESHA] = {**hosts["rocky-9"], "stub_unavailable": "nfs-ganesha"}
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    env = {
        **os.environ,
        "IOLAB_TASK_RECORD": str(record),
        "ANSIBLE_LIBRARY": str(FIXTURES / "library"),
        "ANSIBLE_CALLBACK_PLUGINS": str(FIXTURES / "callback"),
        "ANSIBLE_CALLBACKS_ENABLED": "record_tasks",
    }
    # dnf's repository files go to tmp_path (this machine has no /etc/yum.repos.d); the handler that
    # stops a packaged nfs-ganesha under systemd is left out (this machine's init is not the host's).
    variables = {"_iolab_host_yum_repos_dir": str(tmp_path), "_service_nfs_systemd": False}
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "--check",
            "-i",
            str(inventory),
            "-e",
            json.dumps(variables),
            str(FIXTURES / "roles_check.yml"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tasks = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    assert {task["host"] for task in tasks} == set(hosts), done.stdout[-3000:]

    def of(os_name: str) -> tuple[list[str], list[dict]]:
        mine = [task for task in tasks if task["host"] == os_name]
        return [task["msg"] for task in mine if task["status"] == "failed"], mine

    return of


def short(action: str) -> str:
    return action.rsplit(".", 1)[-1]


def argv0(task: dict) -> str | None:
    cmd = task["cmd"]
    if not cmd:
        return None
    return Path(cmd[0] if isinstance(cmd, list) else cmd.split()[0]).name


def installs(tasks: list[dict]) -> list[tuple[str, list[str]]]:
    """(package manager, names) of each ansible.builtin.package task that ran."""
    return [(short(t["stub_manager"]), t["args"]["name"]) for t in tasks if short(t["action"]) == "package"]


def names_in(family: str) -> set[str]:
    """Every package name the roles' vars/<family>.yml files give."""

    def leaves(value):
        if isinstance(value, dict):
            return [name for item in value.values() for name in leaves(item)]
        return list(value) if isinstance(value, list) else []

    found = set()
    for path in (ROOT / "roles").glob(f"*/vars/{family}.yml"):
        for key, value in yaml.safe_load(path.read_text()).items():
            if key.endswith("_packages"):
                found.update(leaves(value))
    return found


@pytest.mark.parametrize("os_name", ["rocky-9", "rhel-9"])
def test_redhat_hosts_get_dnf_and_redhat_names_only(os_name, check_roles):
    failed, tasks = check_roles(os_name)
    assert failed == []
    assert not [t["task"] for t in tasks if short(t["action"]) in DEBIAN_ONLY_MODULES]
    assert not [t["cmd"] for t in tasks if argv0(t) in DEBIAN_ONLY_COMMANDS]
    assert {argv0(t) for t in tasks if "Find which of the packages" in t["task"]} == {"rpm"}
    debian_only = names_in("Debian") - names_in("RedHat")
    assert debian_only, "the roles name no Debian-only package: this test would prove nothing"
    wanted = [name for manager, names in installs(tasks) for name in names]
    assert {manager for manager, _ in installs(tasks)} == {"dnf"}
    assert not debian_only & set(wanted)
    # Every role's packages were asked for, under their RHEL names (nothing is installed here).
    assert {"procps-ng", "perf", "fuse-sshfs", "nfs-utils", "qemu-img", "ceph-common", "nfs-ganesha"} <= set(wanted)


def test_redhat_repositories_come_before_the_packages_that_need_them(check_roles):
    _, tasks = check_roles("rocky-9")
    steps = [
        (t["task"], t["args"])
        for t in tasks
        if short(t["action"]) in {"package", "yum_repository"} or t["task"].startswith("iolab_host : Enable")
    ]
    sshfs = next(i for i, (_, args) in enumerate(steps) if args and args.get("name") == ["fuse-sshfs"])
    assert steps[sshfs - 1][1]["name"] == ["epel-release"]  # EPEL (Rocky: from extras, by name)
    ceph = next(i for i, (_, args) in enumerate(steps) if args and args.get("name") == ["ceph-common"])
    assert [args["baseurl"] for _, args in steps[ceph - 2 : ceph]] == [
        ["https://download.ceph.com/rpm-reef/el9/$basearch"],
        ["https://download.ceph.com/rpm-reef/el9/noarch"],
    ]
    base = next(args["name"] for _, args in steps if args and "fio" in args.get("name", []))
    assert steps[0][1]["name"] == base, "BaseOS/AppStream packages need no extra repository"


def test_a_package_no_known_repository_has_fails_saying_where_to_get_it(check_roles):
    failed, _ = check_roles(WITHOUT_GANESHA)
    assert len(failed) == 2  # the package task, then the one line that says what to do
    assert failed[1].startswith(f"{WITHOUT_GANESHA}: installing ")
    assert "nfs-ganesha" in failed[1] and "(No match for argument: nfs-ganesha)" in failed[1]
    assert failed[1].endswith(
        "; nfs-ganesha is in neither RHEL 9 nor EPEL 9; enable a repository that has it "
        "(the CentOS Storage SIG's nfs-ganesha repository) and run again"
    )


def test_rhel_gets_epel_from_its_url(check_roles):
    _, tasks = check_roles("rhel-9")
    assert ("dnf", ["https://dl.fedoraproject.org/pub/epel/epel-release-latest-9.noarch.rpm"]) in installs(tasks)


@pytest.mark.parametrize("os_name", ["ubuntu-22.04", "ubuntu-24.04"])
def test_ubuntu_hosts_get_apt_with_its_cache_and_ubuntu_perf(os_name, check_roles):
    failed, tasks = check_roles(os_name)
    assert failed == []
    assert {argv0(t) for t in tasks if "Find which of the packages" in t["task"]} == {"dpkg-query"}
    assert not [t for t in tasks if argv0(t) == "rpm" or short(t["action"]) == "yum_repository"]
    perf = next(t["cmd"] for t in tasks if t["cmd"] and "linux-tools-generic" in t["cmd"])
    assert "linux-perf" not in perf
    # Whatever had to be installed went through apt, after apt's cache check.
    for i, task in enumerate(tasks):
        if short(task["action"]) == "package":
            assert task["stub_manager"].endswith("apt") and short(tasks[i - 1]["action"]) == "apt"
            assert tasks[i - 1]["args"]["cache_valid_time"] == 3600


def test_debian_hosts_query_dpkg_and_get_linux_perf(check_roles):
    failed, tasks = check_roles("debian-12")
    assert failed == []
    assert any(t["cmd"] and "linux-perf" in t["cmd"] and argv0(t) == "dpkg-query" for t in tasks)
    assert not [t for t in tasks if argv0(t) == "rpm" or (t["stub_manager"] or "").endswith("dnf")]


@pytest.mark.parametrize(("os_name", "named"), [("alpine-3.19", "Alpine 3.19.1"), ("ubuntu-20.04", "Ubuntu 20.04")])
def test_an_unsupported_os_is_refused_in_one_line_before_anything_else(os_name, named, check_roles):
    failed, tasks = check_roles(os_name)
    assert failed == [f"{os_name}: {named} is not supported; {SUPPORTED}"]
    assert not [t for t in tasks if short(t["action"]) in {"command", "package", "include_vars"}]


def test_debian_only_modules_are_used_only_under_a_debian_condition():
    """Static: a Debian-only module anywhere in the roles sits under `os_family == 'Debian'`."""

    def walk(tasks, inherited):
        for task in tasks or []:
            when = inherited + ([task["when"]] if isinstance(task.get("when"), str) else task.get("when") or [])
            for key in ("block", "rescue", "always"):
                yield from walk(task.get(key), when)
            if short(next((k for k in task if "." in k or k in DEBIAN_ONLY_MODULES), "")) in DEBIAN_ONLY_MODULES:
                yield task["name"], when

    uses = [
        (path.relative_to(ROOT), name, when)
        for path in (ROOT / "roles").glob("*/*/*.yml")
        if path.parent.name in {"tasks", "handlers"}
        for name, when in walk(yaml.safe_load(path.read_text()), [])
    ]
    assert uses, "no apt task found: the walk is broken"
    assert [use for use in uses if "ansible_facts['os_family'] == 'Debian'" not in use[2]] == []
