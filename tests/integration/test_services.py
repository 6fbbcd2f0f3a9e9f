"""playbooks/services.yml on localhost: a real single-node Ceph cluster and a real nfs-ganesha.

The tests share one lab, brought up once for the module and torn down by a finalizer
that runs even when a test fails: it unmounts what it mounted, runs `absent`, then kills
by PID file whatever is left and deletes the directories. The lab uses its own
directories and free ports, so that it never touches a lab the developer has running
with the defaults (/var/lib/iolab, 3300/6789, 2049).

The tests run in file order: up, use, run again, stop, start, destroy.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support import ROOT

pytestmark = pytest.mark.integration

PLAYBOOK = ROOT / "playbooks" / "services.yml"
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)
CONFIRM_SENTENCE = "To confirm, run again with -e services_confirm_destroy=true"


def free_ports(count: int) -> list[int]:
    """Ports free on loopback now (held open together so that they differ)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def run(argv: list[str], timeout: float = 120, check: bool = True, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout, **kw)
    if check and done.returncode != 0:
        raise AssertionError(f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def pid_alive(pid: int, comm: str) -> bool:
    """Whether `pid` is a live process of program `comm` (not a zombie, not a reused PID)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    state = stat[stat.rindex(")") + 2]
    return name == comm[:15] and state != "Z"


def processes_using(needle: str) -> list[tuple[int, str]]:
    """Live processes whose command line mentions `needle` (our conf or our directory)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmdline and pid_alive(int(proc.name), (proc / "comm").read_text().strip()):
            found.append((int(proc.name), cmdline.strip()))
    return found


def is_mountpoint(path: Path) -> bool:
    return run(["findmnt", "--mountpoint", str(path)], check=False).returncode == 0


@dataclass
class Lab:
    """The module's lab: its directories, ports and how to run the playbook on it."""

    root: Path
    ports: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)
    bootstrap: dict[Path, str] = field(default_factory=dict)

    @property
    def mountpoint(self) -> Path:
        return self.root / "cephfs"

    @property
    def ceph_dir(self) -> Path:
        return self.root / "ceph"

    @property
    def nfs_dir(self) -> Path:
        return self.root / "nfs"

    @property
    def export(self) -> Path:
        return self.root / "export"

    @property
    def inventory(self) -> Path:
        return self.root / "inventory.ini"

    def extra_vars(self) -> dict:
        return {
            "service_ceph_dir": str(self.ceph_dir),
            "service_ceph_mon_port": self.ports["mon"],
            "service_ceph_mon_port_v1": self.ports["mon_v1"],
            # Small, so that the preflight's free-space check passes on any CI disk.
            "service_ceph_osd_size": "4G",
            "service_nfs_dir": str(self.nfs_dir),
            "service_nfs_export_path": str(self.export),
            "service_nfs_port": self.ports["nfs"],
            "service_nfs_mount_port": self.ports["mount"],
            "service_ceph_rgw_port": self.ports["rgw"],
        }

    def playbook(
        self, state: str, *extra: str, timing: str | None = None, timeout: float = 900
    ) -> subprocess.CompletedProcess:
        """ansible-playbook playbooks/services.yml as the controller runs it; `timing` records its duration."""
        env = {
            **os.environ,
            "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
            "ANSIBLE_NOCOLOR": "1",
        }
        argv = [
            "ansible-playbook",
            "-i",
            str(self.inventory),
            str(PLAYBOOK),
            "-e",
            json.dumps(self.extra_vars()),
            "-e",
            f"services_state={state}",
            *extra,
        ]
        started = time.monotonic()
        done = subprocess.run(argv, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        if timing:
            self.timings[timing] = time.monotonic() - started
        return done

    def ceph_client(self) -> dict:
        return json.loads((self.ceph_dir / "client.json").read_text())

    def nfs_server(self) -> dict:
        return json.loads((self.nfs_dir / "client.json").read_text())

    def ceph(self, *args: str, fmt_json: bool = True, timeout: float = 60):
        """The ceph CLI as a later role uses it: conf, keyring and name from client.json."""
        c = self.ceph_client()
        argv = [
            "ceph",
            "--conf",
            c["conf"],
            "--keyring",
            c["keyring"],
            "--name",
            c["client_name"],
            "--connect-timeout",
            "20",
            *args,
        ]
        if fmt_json:
            return json.loads(run([*argv, "--format", "json"], timeout=timeout).stdout)
        return run(argv, timeout=timeout).stdout

    def rbd(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        c = self.ceph_client()
        return run(
            ["rbd", "--conf", c["conf"], "--keyring", c["keyring"], "--id", c["client_id"], *args], timeout=timeout
        )

    def daemon_pids(self) -> dict[str, tuple[int, str]]:
        """PID files the services wrote → (pid, program), whether or not they still run."""
        pids = {}
        for pid_file in sorted((self.ceph_dir / "run").glob("ceph-*.pid")):
            pids[pid_file.name] = (int(pid_file.read_text()), pid_file.name.split(".")[0])
        for name, comm in (("ganesha.pid", "ganesha.nfsd"), ("rpcbind.pid", "rpcbind")):
            pid_file = self.nfs_dir / "run" / name
            if pid_file.exists():
                pids[name] = (int(pid_file.read_text()), comm)
        return pids


def recap(done: subprocess.CompletedProcess) -> dict[str, int]:
    found = RECAP.findall(done.stdout)
    assert found, f"no PLAY RECAP in:\n{done.stdout}\n{done.stderr}"
    _, ok, changed, unreachable, failed = found[-1]
    return {"ok": int(ok), "changed": int(changed), "unreachable": int(unreachable), "failed": int(failed)}


def assert_ok(done: subprocess.CompletedProcess) -> dict[str, int]:
    assert done.returncode == 0, f"playbook failed ({done.returncode}):\n{done.stdout[-8000:]}\n{done.stderr[-4000:]}"
    return recap(done)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    if os.geteuid() != 0:
        pytest.skip("needs root: runs Ceph and nfs-ganesha daemons")
    root = Path(tmp_path_factory.mktemp("services"))
    ports = dict(zip(("mon", "mon_v1", "nfs", "mount", "rgw"), free_ports(5), strict=True))
    lab = Lab(root=root, ports=ports)
    lab.inventory.write_text("localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n")
    try:
        assert_ok(lab.playbook("started", timing="cold started"))
        yield lab
    finally:
        _teardown(lab)
        print("\nservices timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in lab.timings.items()))


def _teardown(lab: Lab) -> None:
    """Leave nothing behind, whatever state the tests left the lab in."""
    unmounted = run(["fusermount", "-u", str(lab.mountpoint)], check=False).returncode == 0
    if not unmounted and is_mountpoint(lab.mountpoint):
        run(["umount", "-l", str(lab.mountpoint)], check=False)
    pids = lab.daemon_pids() if lab.root.exists() else {}
    lab.playbook("absent", "-e", "services_confirm_destroy=true", timeout=300)
    for pid, comm in pids.values():  # the playbook failed or did not stop them all
        if pid_alive(pid, comm):
            os.kill(pid, signal.SIGKILL)
    for pid, _ in processes_using(str(lab.root)):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(lab.root, ignore_errors=True)


# --- started --------------------------------------------------------------------------


def test_started_publishes_how_to_reach_the_services(lab):
    client = lab.ceph_client()
    assert client["conf"] == str(lab.ceph_dir / "ceph.conf")
    assert client["keyring"] == str(lab.ceph_dir / "ceph.client.admin.keyring")
    assert (client["client_name"], client["client_id"]) == ("client.admin", "admin")
    assert client["mon_host"] == f"[v2:127.0.0.1:{lab.ports['mon']},v1:127.0.0.1:{lab.ports['mon_v1']}]"
    assert (client["rbd_pool"], client["fs_name"]) == ("iolab", "iolab")
    nfs = lab.nfs_server()
    assert (nfs["address"], nfs["port"], nfs["pseudo_path"]) == ("127.0.0.1", lab.ports["nfs"], "/iolab")
    assert nfs["export_path"] == str(lab.export)
    assert lab.export.is_dir()


def test_ceph_and_ganesha_are_healthy_and_listen_on_loopback_only(lab):
    assert lab.ceph("health")["status"] == "HEALTH_OK"
    status = lab.ceph("status")
    assert status["osdmap"]["num_up_osds"] == 1
    assert status["monmap"]["num_mons"] == 1
    # rpcbind is the exception: Debian 12's `rpcbind -h` aborts, so it listens on all.
    ours = {pid for pid, comm in lab.daemon_pids().values() if comm != "rpcbind"}
    assert len(ours) == 5
    listening = run(["ss", "-Hltnp"]).stdout.splitlines()
    for line in listening:
        pids = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if pids & ours:
            local = line.split()[3]
            assert local.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")), line


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

    mnt = lab.mountpoint
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
    for query in (
        f"version=3&nfsport={server['port']}&mountport={server['mount_port']}",
        f"version=4&nfsport={server['port']}",
    ):
        listing = run(["nfs-ls", f"{base}?{query}"], timeout=30).stdout
        assert "hello.txt" in listing, (query, listing)
        assert run(["nfs-cat", f"{base}/hello.txt?{query}"], timeout=30).stdout == payload


def test_a_second_started_run_changes_nothing(lab):
    done = lab.playbook("started", timing="second started")
    assert assert_ok(done)["changed"] == 0, done.stdout[-6000:]


# --- stopped, started again --------------------------------------------------------------


def test_stopped_stops_every_daemon_by_its_pid(lab):
    lab.rbd("create", "--size", "16M", "iolab/survives-restart")
    before = lab.daemon_pids()
    assert {"ceph-mon.iolab.pid", "ceph-mgr.iolab.pid", "ceph-osd.0.pid", "ceph-mds.iolab.pid", "ganesha.pid"} <= set(
        before
    )
    assert all(pid_alive(pid, comm) for pid, comm in before.values())
    lab.bootstrap = {
        p: sha256(p)
        for p in (
            lab.ceph_dir / "fsid",
            lab.ceph_dir / "ceph.client.admin.keyring",
            lab.ceph_dir / "osd" / "ceph-0" / "fsid",
        )
    }

    done = lab.playbook("stopped", timing="stopped")
    assert_ok(done)
    assert [name for name, (pid, comm) in before.items() if pid_alive(pid, comm)] == []
    assert processes_using(str(lab.root)) == []
    assert (lab.ceph_dir / "osd" / "ceph-0" / "block").exists()  # the data stays


def test_started_after_stopped_restarts_without_bootstrapping(lab):
    done = lab.playbook("started", timing="started after stopped")
    assert_ok(done)
    assert "Create the monitor's store once" not in _changed_tasks(done.stdout)
    assert "Create the OSD's bluestore" not in _changed_tasks(done.stdout)
    assert {p: sha256(p) for p in lab.bootstrap} == lab.bootstrap
    assert lab.ceph("health")["status"] == "HEALTH_OK"
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


def test_absent_without_confirmation_refuses_and_keeps_everything(lab):
    done = lab.playbook("absent")
    assert done.returncode != 0
    assert CONFIRM_SENTENCE in " ".join(done.stdout.split())
    assert (lab.ceph_dir / "ceph.conf").exists()
    assert (lab.nfs_dir / "ganesha.conf").exists()
    assert lab.ceph("health")["status"] == "HEALTH_OK"


def test_absent_with_confirmation_deletes_everything(lab):
    pids = lab.daemon_pids()
    done = lab.playbook("absent", "-e", "services_confirm_destroy=true", timing="absent")
    assert_ok(done)
    assert not lab.ceph_dir.exists()
    assert not lab.nfs_dir.exists()
    assert [name for name, (pid, comm) in pids.items() if pid_alive(pid, comm)] == []
    assert processes_using(str(lab.root)) == []
    assert lab.export.is_dir()  # the exported data is the user's unless purge is asked
