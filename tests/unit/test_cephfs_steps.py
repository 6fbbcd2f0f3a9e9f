"""The cephfs backend's mount and unmount as one host call over the fan-out (iolab.host.storage.cephfs,
iolab.drive.steps, issue 42). Two hosts on this machine through the fan-out's real engine, and the real ceph-fuse, here
pointed at a monitor that is not there: the preflight's refusal names what is missing, and a mount that fails partway
releases everything it held and names its step. The success path runs against the lab box's real Ceph
(tests/integration/test_ceph_storage_side.py, tests/integration/test_storage_faults.py, tests/lab/test_backends.py:
two simulated hosts)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.drive import runner, steps
from iolab.host import mounts

pytestmark = [
    pytest.mark.skipif(shutil.which("ceph-fuse") is None, reason="needs ceph-fuse (apt-get install ceph-fuse)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root"),
]

HOSTS = ["here1", "here2"]


@pytest.fixture
def engine(here_engine):
    return here_engine()


@pytest.fixture
def backend(tmp_path):
    """A cephfs backend of this test's own (its name, its mount point and state directories), with a ceph.conf whose
    monitor is not there (ceph-fuse gives up after 3 s) and a real keyring."""
    name = f"unit-cfs-{os.getpid()}"
    conf, keyring = tmp_path / "ceph.conf", tmp_path / "keyring"
    conf.write_text("[global]\nmon_host = 127.0.0.1:1\nclient_mount_timeout = 3\n")
    subprocess.run(["ceph-authtool", "--create-keyring", str(keyring), "--gen-key", "-n", "client.admin"], check=True)
    point = tmp_path / "mnt" / name
    variables = {"storage_role": "storage_cephfs", "storage_cephfs_state": "mounted", "storage_cephfs_name": name}
    variables |= {"storage_cephfs_mountpoint": str(point), "storage_cephfs_ceph_conf": str(conf)}
    variables |= {"storage_cephfs_keyring": str(keyring), "storage_cephfs_client": "admin"}
    variables |= {"storage_cephfs_fs_name": "iolab", "storage_cephfs_path": "/", "storage_cephfs_method": "fuse"}
    variables |= {"storage_cephfs_readonly": False, "storage_cephfs_options": []}
    variables |= {"storage_target": str(point), "storage_mount_root": str(tmp_path / "mnt"), "storage_existing": False}
    yield variables
    for host in HOSTS:
        shutil.rmtree(f"/run/iolab/storage/{host}/{name}", ignore_errors=True)
    assert mounts.mounted_at(str(point)) is None


def step(engine, here_extra, variables: dict) -> dict[str, runner.HostOutcome]:
    phase = runner.Phase("storage.yml", variables)
    argvs = steps.calls(phase, HOSTS, set(HOSTS), here_extra, {})
    assert argvs is not None and all("iolab.host.storage.cephfs" in argv for argv in argvs.values())
    outcomes = steps.play(engine, phase, argvs, HOSTS, here_extra, {})
    assert outcomes is not None
    return outcomes


def test_a_missing_keyring_is_refused_and_a_mount_that_fails_releases_what_it_held_on_every_host(
    engine, here_extra, backend
):
    keyring = Path(backend["storage_cephfs_keyring"])
    outcomes = step(engine, here_extra, {**backend, "storage_cephfs_keyring": f"{keyring}.gone"})
    assert [o.state for o in outcomes.values()] == ["failed", "failed"]
    for host, outcome in outcomes.items():
        assert f"{host} has no {keyring}.gone; copy the cluster's ceph.conf and the client's keyring" in outcome.message
    assert {o.task for o in outcomes.values()} == {steps.TASKS["storage_cephfs"]}

    outcomes = step(engine, here_extra, backend)  # ceph-fuse starts, finds no monitor, exits
    assert [o.state for o in outcomes.values()] == ["failed", "failed"]
    for host, outcome in outcomes.items():
        said = "mounting iolab:/ (fuse) failed at 'Mount the file system with ceph-fuse': "
        assert said in outcome.message and f"everything it held on {host} was released" in outcome.message
        assert not Path(f"/run/iolab/storage/{host}/{backend['storage_cephfs_name']}").exists()
        assert not mounts.processes(f"/run/iolab/storage/{host}/{backend['storage_cephfs_name']}")

    outcomes = step(
        engine, here_extra, {**backend, "storage_cephfs_state": "unmounted"}
    )  # nothing there: nothing to do
    assert [o.state for o in outcomes.values()] == ["ok", "ok"], outcomes


def test_a_host_without_the_client_leaves_the_step_to_ansible(engine, here_extra, backend):
    """A stand-in for a host's call (a program that answers as iolab.host.storage.cephfs does on a host without
    ceph-fuse, which this machine has): the step is Ansible's, whose role installs the client and mounts."""
    phase = runner.Phase("storage.yml", backend)
    answer = [sys.executable, "-c", 'print(\'{"install": "fuse", "kept": false, "changed": false}\')']
    ok = [sys.executable, "-c", 'print(\'{"kept": false, "changed": true}\')']
    assert steps.play(engine, phase, {"here1": ok, "here2": answer}, HOSTS, here_extra, {}) is None
    outcomes = steps.play(engine, phase, {"here1": ok, "here2": ok}, HOSTS, here_extra, {})
    assert outcomes is not None and [o.state for o in outcomes.values()] == ["ok", "ok"]
