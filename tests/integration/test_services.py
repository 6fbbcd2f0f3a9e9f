"""playbooks/services.yml: a real single-node Ceph cluster and a real nfs-ganesha — the session's lab in a box.

The box (tests/labbox.py, fixture `lab_box`) is brought up once for the session by `lab.services-up`, on the
simulated lab's controller address, in its own directories and on free ports, so that it never touches a lab
the developer has running with the defaults (/var/lib/iolab, 3300/6789, 2049). These tests check what it
publishes and serves, then — last in the session (marker lab_box_lifecycle) — its own life: stopped,
started again, absent.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path

import pytest

from labbox import assert_ok, pid_alive, processes_using, run

pytestmark = pytest.mark.integration

CONFIRM_SENTENCE = "To confirm, run again with -e services_confirm_destroy=true"
BOOTSTRAP: dict[Path, str] = {}  # the cluster's identity before `stopped`, compared after `started`


def is_mountpoint(path: Path) -> bool:
    return run(["findmnt", "--mountpoint", str(path)], check=False).returncode == 0


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def lab(lab_box):
    return lab_box


# --- started --------------------------------------------------------------------------


def test_started_publishes_how_to_reach_the_services(lab):
    client = lab.ceph_client()
    assert client["conf"] == str(lab.ceph_dir / "ceph.conf")
    assert client["keyring"] == str(lab.ceph_dir / "ceph.client.admin.keyring")
    assert (client["client_name"], client["client_id"]) == ("client.admin", "admin")
    assert client["mon_host"] == f"[v2:{lab.bind}:{lab.ports['mon']},v1:{lab.bind}:{lab.ports['mon_v1']}]"
    assert (client["rbd_pool"], client["fs_name"]) == ("iolab", "iolab")
    nfs = lab.nfs_server()
    assert (nfs["address"], nfs["port"], nfs["pseudo_path"]) == (lab.bind, lab.ports["nfs"], "/iolab")
    assert nfs["export_path"] == str(lab.export)
    assert lab.export.is_dir()


def test_ceph_and_ganesha_are_healthy_and_listen_on_the_bind_address_only(lab):
    lab.assert_healthy()
    status = lab.ceph("status")
    assert status["osdmap"]["num_up_osds"] == 1
    assert status["monmap"]["num_mons"] == 1
    # rpcbind is the exception: Debian 12's `rpcbind -h` aborts, so it listens on all.
    ours = {pid for pid, comm in lab.daemon_pids().values() if comm != "rpcbind"}
    assert len(ours) == 6  # mon, mgr, osd, mds, radosgw, ganesha
    listening = run(["ss", "-Hltnp"]).stdout.splitlines()
    for line in listening:
        pids = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if pids & ours:
            local = line.split()[3]
            assert local.startswith((f"{lab.bind}:", f"[::ffff:{lab.bind}]:")), line


def test_an_rbd_image_can_be_written_and_removed(lab):
    image = f"{lab.ceph_client()['rbd_pool']}/itest-{os.getpid()}"
    lab.rbd("create", "--size", "64M", image)
    try:
        bench = lab.rbd(
            "bench", "--io-type", "write", "--io-size", "4M", "--io-total", "32M", "--io-pattern", "seq", image
        )
        assert "elapsed" in bench.stdout
        info = json.loads(lab.rbd("info", "--format", "json", image).stdout)
        assert info["size"] == 64 << 20
        usage = json.loads(lab.rbd("du", "--format", "json", image).stdout)
        assert usage["images"][0]["used_size"] >= 32 << 20  # the writes reached the OSD
    finally:
        lab.rbd("rm", "--no-progress", image)
    assert image.split("/")[1] not in json.loads(lab.rbd("ls", "--format", "json", "iolab").stdout)


def test_cephfs_has_an_active_mds_and_mounts_with_ceph_fuse(lab):
    client = lab.ceph_client()
    fs = lab.ceph("fs", "status", client["fs_name"])
    assert [m["state"] for m in fs["mdsmap"]] == ["active"]

    mnt = lab.root / f"itest-cephfs-{os.getpid()}"
    mnt.mkdir(exist_ok=True)
    run(
        [
            "ceph-fuse",
            "--conf",
            client["conf"],
            "--keyring",
            client["keyring"],
            "--id",
            client["client_id"],
            "--client_fs",
            client["fs_name"],
            str(mnt),
        ],
        timeout=60,
    )
    try:
        assert is_mountpoint(mnt)
        payload = os.urandom(1 << 20)
        (mnt / "itest.bin").write_bytes(payload)
        os.sync()
        assert (mnt / "itest.bin").read_bytes() == payload
        (mnt / "itest.bin").unlink()
    finally:
        run(["fusermount", "-u", str(mnt)], timeout=60)
    assert not is_mountpoint(mnt)


def test_nfs_serves_the_export_over_v3_and_v4(lab):
    server = lab.nfs_server()
    payload = f"hello from {os.getpid()} at {time.time()}\n"
    (lab.export / "hello.txt").write_text(payload)
    base = f"nfs://{server['address']}{server['pseudo_path']}"
    queries = (
        f"version=3&nfsport={server['port']}&mountport={server['mount_port']}",
        f"version=4&nfsport={server['port']}",
    )
    for query in queries:
        listing = run(["nfs-ls", f"{base}?{query}"], timeout=30).stdout
        assert "hello.txt" in listing, (query, listing)
        assert run(["nfs-cat", f"{base}/hello.txt?{query}"], timeout=30).stdout == payload
    # A file put in the export on the server just after a listing is in the next one: ganesha keeps no 60 s old
    # view of the directory (Attr_Expiration_Time 0, docs/LAB_PITFALLS.md).
    (lab.export / "hello-again.txt").write_text(payload)
    try:
        for query in queries:
            assert "hello-again.txt" in run(["nfs-ls", f"{base}?{query}"], timeout=30).stdout, query
    finally:
        (lab.export / "hello-again.txt").unlink()


def test_a_second_started_run_changes_nothing(lab):
    done = lab.playbook("started", timing="second started")
    assert assert_ok(done)["changed"] == 0, done.stdout[-6000:]


# --- stopped, started again --------------------------------------------------------------


@pytest.mark.lab_box_lifecycle
def test_stopped_stops_every_daemon_by_its_pid(lab):
    lab.rbd("create", "--size", "16M", "iolab/survives-restart")
    before = lab.daemon_pids()
    assert {"ceph-mon.iolab.pid", "ceph-mgr.iolab.pid", "ceph-osd.0.pid", "ceph-mds.iolab.pid", "ganesha.pid"} <= set(
        before
    )
    assert all(pid_alive(pid, comm) for pid, comm in before.values())
    BOOTSTRAP.update(
        {
            p: sha256(p)
            for p in (
                lab.ceph_dir / "fsid",
                lab.ceph_dir / "ceph.client.admin.keyring",
                lab.ceph_dir / "osd" / "ceph-0" / "fsid",
            )
        }
    )

    done = lab.playbook("stopped", timing="stopped")
    assert_ok(done)
    assert [name for name, (pid, comm) in before.items() if pid_alive(pid, comm)] == []
    assert processes_using(str(lab.root)) == []
    assert (lab.ceph_dir / "osd" / "ceph-0" / "block").exists()  # the data stays


@pytest.mark.lab_box_lifecycle
def test_started_after_stopped_restarts_without_bootstrapping(lab):
    done = lab.playbook("started", timing="started after stopped")
    assert_ok(done)
    assert "Create the monitor's store once" not in _changed_tasks(done.stdout)
    assert "Create the OSD's bluestore" not in _changed_tasks(done.stdout)
    assert BOOTSTRAP and {p: sha256(p) for p in BOOTSTRAP} == BOOTSTRAP
    lab.assert_healthy()
    assert "survives-restart" in json.loads(lab.rbd("ls", "--format", "json", "iolab").stdout)
    assert [m["state"] for m in lab.ceph("fs", "status", "iolab")["mdsmap"]] == ["active"]
    assert "hello.txt" in run(["nfs-ls", lab.nfs_server()["v4_url"]], timeout=30).stdout


def _changed_tasks(stdout: str) -> list[str]:
    """Names of the tasks that reported a change (default callback output)."""
    names, task = [], None
    for line in stdout.splitlines():
        m = re.match(r"^(?:TASK|RUNNING HANDLER) \[(?:[^:\]]+ : )?(.*)\] \**$", line)
        if m:
            task = m.group(1)
        elif line.startswith("changed:") and task:
            names.append(task)
    return names


# --- absent ----------------------------------------------------------------------------------


@pytest.mark.lab_box_lifecycle
def test_absent_without_confirmation_refuses_and_keeps_everything(lab):
    done = lab.playbook("absent")
    assert done.returncode != 0
    assert CONFIRM_SENTENCE in " ".join(done.stdout.split())
    assert (lab.ceph_dir / "ceph.conf").exists()
    assert (lab.nfs_dir / "ganesha.conf").exists()
    lab.assert_healthy()


@pytest.mark.lab_box_lifecycle
def test_absent_with_confirmation_deletes_everything(lab):
    pids = lab.daemon_pids()
    done = lab.playbook("absent", "-e", "services_confirm_destroy=true", timing="absent")
    assert_ok(done)
    assert not lab.ceph_dir.exists()
    assert not lab.nfs_dir.exists()
    assert [name for name, (pid, comm) in pids.items() if pid_alive(pid, comm)] == []
    assert processes_using(str(lab.root)) == []
    assert lab.export.is_dir()  # the exported data is the user's unless purge is asked
