"""Storage backends on simulated hosts, against the lab's own Ceph and NFS (lab.services-up --bind <the lab's bridge>).

The session's lab in a box (fixture `lab_box`, tests/labbox.py: brought up through `invoke lab.services-up`
on the simulated lab's bridge, in its own directories and on free ports); this module's files, images and
campaign are its own, and its fixture removes them whatever happens. Every backend is mounted the way users do it
(`invoke storage.mount`, `bench.all`) and checked from the hosts over SSH; after each
test nothing of it may be left on the hosts: mounts, loop devices, daemons (by PID),
state directories, records.

The tests run in file order; the snapshot made in the first RBD test is reused (and
must not be loaded again) by the ones after it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from iolab import sim
from iolab.shared.processes import alive
from labbox import LabBox
from support import Cli

pytestmark = pytest.mark.lab

STATE = Path("/run/iolab/storage")  # per host and backend (the roles' state_dir)
RECORDS = Path("/run/iolab/mounts")


def processes_naming(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            with contextlib.suppress(OSError):
                if text in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace") and alive(
                    int(proc.name)
                ):
                    found.append(int(proc.name))
    return found


@dataclass
class Services:
    """The module's side of the session's lab in a box: its own files (data set, images), campaign and results."""

    root: Path
    box: LabBox
    cli: Cli
    campaign: Path = field(init=False)
    timings: dict[str, float] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)  # backends the teardown must make sure of

    def client(self) -> dict:
        return self.box.ceph_client()

    def nfs(self) -> dict:
        return self.box.nfs_server()

    def rbd(self, *args: str) -> str:
        return self.box.rbd(*args).stdout

    def timed(self, label: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        started = time.monotonic()
        done = self.cli(*args, check=check)
        self.timings[label] = time.monotonic() - started
        return done


@pytest.fixture(scope="module")
def services(lab_box, sim_hosts) -> Iterator[Services]:
    root = Path(tempfile.mkdtemp(prefix="iolab-bk-", dir="/tmp"))
    lab = Services(root=root, box=lab_box, cli=Cli(root / "results"))
    try:
        lab.campaign = write_campaign(lab, sim_hosts)
        yield lab
    finally:
        _teardown(lab, sim_hosts)
        print("\nbackend timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in lab.timings.items()))


def _teardown(lab: Services, sim_hosts) -> None:
    """Whatever a failed test left: unmount every backend it touched, remove its images, kill the rest."""
    if hasattr(lab, "campaign"):
        for name in sorted(lab.touched):
            lab.cli(
                "storage.unmount",
                "--campaign",
                str(lab.campaign),
                "--backend",
                name,
                "--inventory",
                str(sim_hosts.inventory),
                "--hosts",
                "gpu[01-04]",
                check=False,
            )
    pool = lab.client()["rbd_pool"]
    for image in ("itest-ds", "itest-full", "itest-blk"):  # the module's images, their snapshots first
        with contextlib.suppress(AssertionError):
            lab.box.rbd("snap", "purge", f"{pool}/{image}")
        with contextlib.suppress(AssertionError):
            lab.box.rbd("rm", "--no-progress", f"{pool}/{image}")
    for pid in processes_naming(str(lab.root)):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(lab.root, ignore_errors=True)


# --- the campaign every test mounts from ------------------------------------------------------

FIO = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "ramp": "0s"}


def write_campaign(lab: Services, sim_hosts) -> Path:
    source = lab.root / "source"  # a small ImageNet-shaped data set with its manifest
    subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.host.dataset",
            "gen",
            str(source),
            "--files",
            "40",
            "--seed",
            "7",
            "--classes",
            "4",
            "--json",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    served = lab.root / "served"  # what gpu01 serves over sshfs
    served.mkdir()
    (served / "hello.txt").write_text("served by gpu01\n")
    big = lab.root / "big"  # more than the 16 MiB image of itest-ds-full holds
    big.mkdir()
    (big / "big.bin").write_bytes(os.urandom(24 << 20))
    image = lab.root / "img"  # an ext4 image file for the generic mount backend
    (lab.root / "img-tree").mkdir()
    (lab.root / "img-tree" / "hello.txt").write_text("inside the image\n")
    subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-d", str(lab.root / "img-tree"), str(image), "16M"], check=True, capture_output=True
    )
    c, nfs = lab.client(), lab.nfs()
    ceph = {"ceph_conf": c["conf"], "keyring": c["keyring"], "client": c["client_id"]}
    snapshot = {
        "type": "rbd_snapshot",
        "image": "itest-ds",
        "source": str(source),
        "fio_size": "32MiB",
        "size": "256MiB",
        **ceph,
    }
    data = {
        "name": "itest-backends",
        "repetitions": 1,
        "workloads": [FIO],
        "backends": [
            {"name": "itest-ds", **snapshot},
            {"name": "itest-ds-bad", **snapshot, "options": ["no_such_option"]},  # mounting fails after mapping
            # Loading fails halfway: the source does not fit in the image.
            {"name": "itest-ds-full", **snapshot, "image": "itest-full", "size": "16MiB", "source": str(big)},
            {"name": "itest-blk", "type": "rbd", "size": "64MiB", **ceph},
            {"name": "itest-fs", "type": "cephfs", **ceph},
            {"name": "itest-ssh", "type": "sshfs", "host": "gpu01", "path": str(served), "readonly": True},
            {"name": "itest-ssh-rw", "type": "sshfs", "host": "gpu01", "path": str(served)},  # fio's, below
            {
                "name": "itest-nfs",
                "type": "nfs",
                "server": nfs["address"],
                "export": nfs["pseudo_path"],
                "version": 4,
                "port": nfs["port"],
                "method": "kernel",  # the FUSE client's mounts are tests/integration/test_nfs_userspace.py's
            },
            {
                "name": "itest-nfs-bad",
                "type": "nfs",
                "server": nfs["address"],
                "export": "/nowhere",
                "version": 4,
                "port": nfs["port"],
            },
            {
                "name": "itest-img",
                "type": "mount",
                "source": str(image),
                "fstype": "ext4",
                "options": ["loop"],
                "readonly": True,
            },
        ],
    }
    path = lab.root / "backends.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def storage(lab: Services, sim_hosts, verb: str, backend: str, hosts: str = "gpu01,gpu02", check: bool = True):
    lab.touched.add(backend)
    done = lab.timed(
        f"{verb} {backend}",
        f"storage.{verb}",
        "--campaign",
        str(lab.campaign),
        "--backend",
        backend,
        "--inventory",
        str(sim_hosts.inventory),
        "--hosts",
        hosts,
        check=check,
    )
    if verb == "unmount" and done.returncode == 0:
        lab.touched.discard(backend)
    return done


def nothing_left(lab: Services, sim_hosts, backend: str, pids: list[int] = ()) -> None:
    assert left_behind(sim_hosts, backend, pids) == {}
    lab.touched.discard(backend)


def on(sim_hosts, name: str):
    return next(h for h in sim_hosts.hosts if h.name == name)


def left_behind(sim_hosts, backend: str, pids: list[int] = ()) -> dict:
    """What of a backend is still on the hosts: mounts, loop devices, daemons, state directories, records."""
    found: dict = {}
    for host in sim_hosts.hosts:
        out = sim_hosts.ssh(host, f"findmnt -rn -o TARGET,SOURCE /mnt/iolab/{backend} || true").stdout.strip()
        if out:
            found[f"mount on {host.name}"] = out
        state = STATE / host.name / backend
        if state.exists():
            found[f"state directory of {host.name}"] = sorted(p.name for p in state.iterdir())
        named = processes_naming(str(state) + "/")
        if named:
            found[f"processes of {host.name}"] = named
    loops = json.loads(
        subprocess.run(["losetup", "--json", "--list"], capture_output=True, text=True).stdout or '{"loopdevices": []}'
    )["loopdevices"]
    backed = [
        d["name"]
        for d in loops
        if f"/{backend}/" in (d.get("back-file") or "") or (d.get("back-file") or "").endswith("/img")
    ]
    if backed:
        found["loop devices"] = backed
    records = (
        [p.name for p in RECORDS.glob("*.json") if json.loads(p.read_text()).get("backend") == backend]
        if RECORDS.is_dir()
        else []
    )
    if records:
        found["records"] = records
    still = [pid for pid in pids if alive(pid)]
    if still:
        found["daemons still running"] = still
    return found


# --- the services --------------------------------------------------------------------------------


def test_services_up_serves_the_simulated_hosts(services, sim_hosts):
    client, nfs = services.client(), services.nfs()
    assert client["mon_host"].startswith(f"[v2:{sim_hosts.controller}:")
    assert nfs["address"] == sim_hosts.controller
    (services.box.export / "from-controller.txt").write_text("exported\n")
    # NFS server side, from a simulated host, with no kernel NFS client: libnfs.
    listing = sim_hosts.ssh(on(sim_hosts, "gpu03"), f"nfs-ls '{nfs['v4_url']}'").stdout
    assert "from-controller.txt" in listing
    services.box.assert_healthy()


# --- rbd_snapshot -------------------------------------------------------------------------------


def test_one_snapshot_is_mapped_read_only_on_two_hosts_at_once(services, sim_hosts):
    storage(services, sim_hosts, "mount", "itest-ds")
    daemons: list[int] = []
    try:
        manifest = (services.root / "source" / "manifest.jsonl").read_text().splitlines()[1:]
        checks = "".join(f"{json.loads(e)['sha256']}  {json.loads(e)['path']}\n" for e in manifest)
        for name in ("gpu01", "gpu02"):
            host = on(sim_hosts, name)
            mount = json.loads(
                sim_hosts.ssh(host, "findmnt --json -o SOURCE,FSTYPE,OPTIONS /mnt/iolab/itest-ds").stdout
            )["filesystems"][0]
            assert mount["fstype"] == "ext4" and mount["source"].startswith("/dev/loop")
            assert "ro" in mount["options"].split(",")
            # Every file of the data set, read on this host, matches the manifest.
            verify = subprocess.run(
                sim_hosts.ssh_argv(host, "cd /mnt/iolab/itest-ds/iolab-$(hostname)/dataset && sha256sum --strict -c -"),
                input=checks,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert verify.returncode == 0 and verify.stdout.count(": OK") == 40, verify.stdout + verify.stderr
            write = sim_hosts.ssh(host, "touch /mnt/iolab/itest-ds/dataset/new", check=False)
            assert write.returncode != 0 and "Read-only file system" in write.stderr
            # The loop device is read-only too, and the record says how the snapshot is mapped.
            loop = json.loads(
                subprocess.run(["losetup", "--json", "--list", mount["source"]], capture_output=True, text=True).stdout
            )["loopdevices"][0]
            assert loop["ro"] and loop["back-file"] == f"{STATE}/{name}/itest-ds/image"
            record = next(
                json.loads(p.read_text())
                for p in RECORDS.glob("*.json")
                if json.loads(p.read_text()).get("backend") == "itest-ds"
                and json.loads(p.read_text())["source"] == mount["source"]
            )
            assert (record["method"], record["readonly"], record["snapshot"]) == (
                "qemu-fuse",
                True,
                "iolab/itest-ds@dataset",
            )
            assert (
                record["dataset_manifest_hash"]
                == subprocess.run(
                    ["sha256sum", str(services.root / "source" / "manifest.jsonl")], capture_output=True, text=True
                ).stdout.split()[0]
            )
            daemons.append(int((STATE / name / "itest-ds" / "qemu-storage-daemon.pid").read_text()))
        # Two QEMU daemons, each with the one snapshot open read-only.
        for pid in daemons:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            blockdev = json.loads(argv[argv.index(b"--blockdev") + 1])
            assert (blockdev["image"], blockdev["snapshot"], blockdev["read-only"]) == ("itest-ds", "dataset", True)
        snaps = json.loads(services.rbd("snap", "ls", "--format", "json", "iolab/itest-ds"))
        assert [(s["name"], s["protected"]) for s in snaps] == [("dataset", "true")]
    finally:
        storage(services, sim_hosts, "unmount", "itest-ds")
    assert left_behind(sim_hosts, "itest-ds", daemons) == {}


def test_a_mapping_or_a_load_that_fails_partway_leaves_nothing_behind(services, sim_hosts):
    loaded = json.loads(services.rbd("image-meta", "get", "iolab/itest-ds", "iolab.snapshot.dataset"))
    done = storage(services, sim_hosts, "mount", "itest-ds-bad", check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    text = " ".join(done.stderr.split())
    assert "failed at 'Mount the snapshot read-only (a scratch image read-write)'" in text
    assert "everything it held on gpu01 was released" in text and "on gpu02 was released" in text
    nothing_left(services, sim_hosts, "itest-ds-bad")
    # The snapshot holds the same content: it was not loaded again.
    assert json.loads(services.rbd("image-meta", "get", "iolab/itest-ds", "iolab.snapshot.dataset")) == loaded

    full = storage(services, sim_hosts, "mount", "itest-ds-full", check=False)
    text = " ".join(full.stderr.split())
    assert (
        full.returncode == 1
        and "loading iolab/itest-full failed at 'Copy the source directory into the image'" in text
        and "No space left on device" in text
    ), text
    assert "nothing is left mapped on gpu01" in text
    nothing_left(services, sim_hosts, "itest-ds-full")
    assert json.loads(services.rbd("snap", "ls", "--format", "json", "iolab/itest-full")) == []


def test_a_campaign_reads_the_snapshot_and_the_image_through_librbd(services, sim_hosts, tmp_path):
    # The storage side is in the inventory: its caches are dropped before each run too.
    inventory = yaml.safe_load(sim_hosts.inventory.read_text())
    inventory["all"]["children"]["ceph_osd"] = {
        "hosts": {"ceph-lab": {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"}}
    }
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    data = yaml.safe_load(services.campaign.read_text())
    data["backends"] = [b for b in data["backends"] if b["name"] in ("itest-ds", "itest-blk")]
    campaign = tmp_path / "campaign.yml"
    campaign.write_text(yaml.safe_dump(data))
    loaded = json.loads(services.rbd("image-meta", "get", "iolab/itest-ds", "iolab.snapshot.dataset"))

    services.touched.update({"itest-ds", "itest-blk"})
    services.timed(
        "bench.all ds+blk", "bench.all", "--campaign", str(campaign), "--inventory", str(path), "--hosts", "gpu01,gpu02"
    )
    bw = {(s["backend"], s["host"]): s for s in services.cli.samples("itest-backends") if s["metric"] == "read_bw"}
    assert set(bw) == {(b, h) for b in ("itest-ds", "itest-blk") for h in ("gpu01", "gpu02", "*")}
    snap = bw["itest-ds", "gpu01"]["metadata"]
    assert snap["host"]["mount"]["iolab"]["method"] == "qemu-fuse"
    assert snap["host"]["mount"]["iolab"]["dataset_manifest_hash"] == loaded["manifest_hash"]
    assert snap["job"]["size"] == 32 << 20
    assert snap["storage_cache_state"]["dropped_on"] == ["ceph-lab"]
    raw = services.cli.results / "itest-backends" / "raw"  # each host's run one call, the drop between the two
    assert {json.loads(p.read_text())["launcher"] for p in raw.glob("*/gpu0[12]/run.json")} == {"clustershell"}
    blk = bw["itest-blk", "gpu02"]["metadata"]
    assert blk["fio_options"]["ioengine"] == "rbd" and blk["fio_options"]["rbdname"] == "iolab-itest-blk"
    usage = json.loads(services.rbd("du", "--format", "json", "iolab/iolab-itest-blk"))["images"][0]
    assert usage["used_size"] == usage["provisioned_size"] == 64 << 20  # prefilled: every extent written
    assert json.loads(services.rbd("image-meta", "get", "iolab/itest-ds", "iolab.snapshot.dataset")) == loaded
    nothing_left(services, sim_hosts, "itest-ds")
    nothing_left(services, sim_hosts, "itest-blk")


# --- s3 -----------------------------------------------------------------------------------------


def test_an_s3_bucket_feeds_the_loader_on_two_hosts_each_from_its_own_staged_copy(services, sim_hosts, tmp_path):
    """Simulated hosts share one disk: each generates the data set in its own staging directory (two hosts
    writing one directory, each replacing what it finds, would race); the first uploads it once."""
    s3 = services.client()["s3"]
    data = {
        "name": "itest-backends-s3",
        "repetitions": 1,
        "dataset": {"files": 40, "seed": 7, "classes": 4},
        "backends": [
            {
                "name": "itest-s3",
                "type": "s3",
                "endpoint": s3["endpoint"],
                "bucket": s3["bucket"],
                "credentials": s3["credentials"],
                "prefix": "itest-lab",
            }
        ],
        "workloads": [{"name": "loader", "type": "pytorch", "reader": "s3", "workers": 1, "batch_size": 8}],
    }
    campaign = tmp_path / "s3.yml"
    campaign.write_text(yaml.safe_dump(data, sort_keys=False))
    staging = Path("/opt/iolab/s3-staging/itest-s3")
    args = ("--campaign", str(campaign), "--inventory", str(sim_hosts.inventory), "--hosts", "gpu01,gpu02")
    try:
        services.timed("bench.all s3", "bench.all", *args)
        rates = {s["host"]: s for s in services.cli.samples("itest-backends-s3") if s["metric"] == "samples_per_s"}
        assert {"gpu01", "gpu02"} <= set(rates) and all(rates[h]["value"] > 0 for h in ("gpu01", "gpu02"))
        copies = sorted(p.parent.parent.name for p in staging.glob("*/dataset/manifest.jsonl"))
        assert copies == ["iolab-gpu01", "iolab-gpu02"]
        assert (
            rates["gpu01"]["metadata"]["dataset_manifest_hash"] == rates["gpu02"]["metadata"]["dataset_manifest_hash"]
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# --- cephfs, sshfs ------------------------------------------------------------------------------


def test_cephfs_is_shared_by_two_hosts_through_ceph_fuse(services, sim_hosts):
    storage(services, sim_hosts, "mount", "itest-fs")
    daemons = []
    try:
        for name in ("gpu01", "gpu02"):
            mount = json.loads(
                sim_hosts.ssh(on(sim_hosts, name), "findmnt --json -o SOURCE,FSTYPE /mnt/iolab/itest-fs").stdout
            )["filesystems"][0]
            assert (mount["source"], mount["fstype"]) == ("ceph-fuse", "fuse.ceph-fuse")
            daemons.append(int((STATE / name / "itest-fs" / "ceph-fuse.pid").read_text()))
        sim_hosts.ssh(on(sim_hosts, "gpu01"), "echo written-on-gpu01 > /mnt/iolab/itest-fs/shared.txt && sync")
        seen = sim_hosts.ssh(on(sim_hosts, "gpu02"), "cat /mnt/iolab/itest-fs/shared.txt").stdout
        assert seen == "written-on-gpu01\n"
        sim_hosts.ssh(on(sim_hosts, "gpu02"), "rm /mnt/iolab/itest-fs/shared.txt")
    finally:
        storage(services, sim_hosts, "unmount", "itest-fs")
    assert left_behind(sim_hosts, "itest-fs", daemons) == {}


def test_sshfs_mounts_a_directory_of_another_simulated_host_read_only(services, sim_hosts):
    storage(services, sim_hosts, "mount", "itest-ssh", hosts="gpu02,gpu03")
    daemons = []
    try:
        for name in ("gpu02", "gpu03"):
            host = on(sim_hosts, name)
            mount = json.loads(
                sim_hosts.ssh(host, "findmnt --json -o SOURCE,FSTYPE,OPTIONS /mnt/iolab/itest-ssh").stdout
            )["filesystems"][0]
            assert mount["fstype"] == "fuse.sshfs"
            assert mount["source"] == f"root@{on(sim_hosts, 'gpu01').address}:{services.root / 'served'}"
            assert "ro" in mount["options"].split(",")
            assert sim_hosts.ssh(host, "cat /mnt/iolab/itest-ssh/hello.txt").stdout == "served by gpu01\n"
            assert sim_hosts.ssh(host, "touch /mnt/iolab/itest-ssh/x", check=False).returncode != 0
            daemons += processes_naming(f"{STATE}/{name}/itest-ssh/")
        assert daemons, "no sshfs process names the backend's state directory"
    finally:
        storage(services, sim_hosts, "unmount", "itest-ssh", hosts="gpu02,gpu03")
    assert left_behind(sim_hosts, "itest-ssh", daemons) == {}


def test_a_campaign_on_sshfs_takes_the_serving_hosts_key_on_its_calls_stdin(services, sim_hosts, tmp_path):
    """The fan-out's route (bench.all): the serving host's login key goes on the sshfs call's stdin, never in an
    argv, and the mount is taken away at the end."""
    data = yaml.safe_load(services.campaign.read_text())
    data["name"] = "itest-ssh-campaign"  # a campaign of its own: the others' store theirs under the module's name
    data["backends"] = [b for b in data["backends"] if b["name"] == "itest-ssh-rw"]
    data["workloads"] = [{**FIO, "size": "16MiB"}]
    campaign = tmp_path / "campaign.yml"
    campaign.write_text(yaml.safe_dump(data))
    services.touched.add("itest-ssh-rw")
    services.timed(
        "bench.all ssh",
        "bench.all",
        "--campaign",
        str(campaign),
        "--inventory",
        str(sim_hosts.inventory),
        "--hosts",
        "gpu02",
    )
    bw = [s for s in services.cli.samples("itest-ssh-campaign") if s["metric"] == "read_bw" and s["host"] == "gpu02"]
    assert len(bw) == 1 and bw[0]["metadata"]["host"]["mount"]["iolab"]["method"] == "sshfs", bw
    key = sim.private_key(sim_hosts.lab_dir).read_text().strip().splitlines()
    events = "".join(p.read_text(errors="replace") for p in services.cli.results.rglob("*.json*"))
    assert key[1] not in events  # nothing the command stored holds a line of the key
    nothing_left(services, sim_hosts, "itest-ssh-rw")


# --- nfs, mount ----------------------------------------------------------------------------------


def test_nfs_checks_the_export_then_says_the_kernel_has_no_client(services, sim_hosts):
    done = storage(services, sim_hosts, "mount", "itest-nfs", hosts="gpu01", check=False)
    text = " ".join(done.stderr.split())
    assert done.returncode == 1 and "Traceback" not in text
    assert "the export answers, but the kernel of gpu01" in text and "has no NFS client" in text
    assert "with method kernel; load the nfs module" in text and "set the backend's method to auto or fuse" in text
    bad = storage(services, sim_hosts, "mount", "itest-nfs-bad", hosts="gpu01", check=False)
    text = " ".join(bad.stderr.split())
    assert bad.returncode == 1 and f"export {sim_hosts.controller}:/nowhere (NFSv4) does not answer gpu01" in text
    nothing_left(services, sim_hosts, "itest-nfs")
    nothing_left(services, sim_hosts, "itest-nfs-bad")


def test_the_generic_mount_backend_mounts_a_loop_ext4_image_read_only(services, sim_hosts):
    storage(services, sim_hosts, "mount", "itest-img")
    try:
        for name in ("gpu01", "gpu02"):
            host = on(sim_hosts, name)
            assert sim_hosts.ssh(host, "cat /mnt/iolab/itest-img/hello.txt").stdout == "inside the image\n"
            mount = json.loads(
                sim_hosts.ssh(host, "findmnt --json -o SOURCE,FSTYPE,OPTIONS /mnt/iolab/itest-img").stdout
            )["filesystems"][0]
            assert mount["fstype"] == "ext4" and mount["source"].startswith("/dev/loop")
            assert "ro" in mount["options"].split(",")
            assert sim_hosts.ssh(host, "touch /mnt/iolab/itest-img/x", check=False).returncode != 0
    finally:
        storage(services, sim_hosts, "unmount", "itest-img")
    assert left_behind(sim_hosts, "itest-img") == {}
