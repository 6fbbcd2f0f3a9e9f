"""The lab in a box for tests: one Ceph cluster (RBD, CephFS, radosgw) and one nfs-ganesha for the whole session.

Brought up once, in the background from the session's first test when its tests will ask for it (tests/conftest.py,
`_lab_box_early`), else the first time a test asks for the fixture `lab_box` or `ceph_box`, the way a user does it
(`./lab lab.services-up --bind ADDRESS --services S --vars-file F`), in its own directory under /tmp and on free
ports, bound to the session's simulated lab's controller address: localhost campaigns and the simulated hosts
reach the same services. `ceph_box` starts Ceph alone and `lab_box` both services;
a test that needs NFS after a Ceph-only start adds it (`LabBox.ensure`). Under the CI's two pytest-xdist
workers only one of them asks for NFS: this machine has one rpcbind, and a second nfs-ganesha's stop
unregistered the first's NFS program (docs/DESIGN.md, "The test suite"). A developer's lab on the defaults
(/var/lib/iolab, 3300/6789, 2049, 7480) is never touched. Torn down at the end of the session whatever
happened: its daemons ended by their PIDs, and the directory deleted (`LabBox.tear_down`).

Every test of the session (of a pytest-xdist worker, under the CI) shares it, so a test names what it creates
(images, buckets' prefixes, directories) with its own prefix and removes it, and a test that stops a daemon or
marks an OSD out restores it before it ends. The tests of the services' own life cycle (stopped, started again,
absent) are marked `lab_box_lifecycle` and run last (tests/conftest.py orders them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from iolab.drive.services import SERVICES
from support import ROOT, Cli

PLAYBOOK = ROOT / "playbooks" / "services.yml"
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)
PORTS = ("mon", "mon_v1", "nfs", "mount", "rgw")
BUCKET = "itest-box"


def free_ports(address: str, count: int) -> list[int]:
    """Ports free on `address` now (held open together so that they differ)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((address, 0))
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
            comm = (proc / "comm").read_text().strip()
        except OSError:
            continue
        if needle in cmdline and pid_alive(int(proc.name), comm):
            found.append((int(proc.name), cmdline.strip()))
    return found


def recap(done: subprocess.CompletedProcess) -> dict[str, int]:
    found = RECAP.findall(done.stdout)
    assert found, f"no PLAY RECAP in:\n{done.stdout}\n{done.stderr}"
    _, ok, changed, unreachable, failed = found[-1]
    return {"ok": int(ok), "changed": int(changed), "unreachable": int(unreachable), "failed": int(failed)}


def assert_ok(done: subprocess.CompletedProcess) -> dict[str, int]:
    assert done.returncode == 0, f"playbook failed ({done.returncode}):\n{done.stdout[-8000:]}\n{done.stderr[-4000:]}"
    return recap(done)


@dataclass
class LabBox:
    """The session's services: their directories, ports, address, and the clients' ways to them."""

    root: Path
    bind: str
    ports: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)
    started: subprocess.CompletedProcess | None = None  # lab.services-up's own output
    services: tuple[str, ...] = ()  # the services up: ("ceph",) or ("ceph", "nfs")
    starting: threading.Thread | None = field(default=None, repr=False)  # start_soon's, until ensure has waited for it
    start_error: BaseException | None = field(default=None, repr=False)  # what start_soon's start raised

    def start_soon(self, *services: str) -> None:
        """`ensure(*services)` in a thread of its own, so that the tests that need no box run while it comes up (Ceph's
        start: 66 s, of which 37 s CPU, the rest waits on the daemons; tests/conftest.py, `_lab_box_early`); the next
        `ensure` waits for it and raises what it raised."""

        def start() -> None:
            try:
                self.ensure(*services)
            except BaseException as error:  # noqa: BLE001 - the test that asks for the box next raises it
                self.start_error = error

        self.starting = threading.Thread(target=start, name="lab-box-start", daemon=True)
        self.starting.start()

    def wait_started(self) -> None:
        """Wait for start_soon's start, if one is under way (not from its own thread)."""
        if self.starting is not None and self.starting is not threading.current_thread():
            self.starting.join()
            self.starting = None

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
    def vars_file(self) -> Path:
        return self.root / "services.yml"

    @property
    def inventory(self) -> Path:
        return self.root / "inventory.ini"

    def role_vars(self) -> dict:
        return {
            "service_ceph_dir": str(self.ceph_dir),
            "service_ceph_mon_port": self.ports["mon"],
            "service_ceph_mon_port_v1": self.ports["mon_v1"],
            # Small, so that the preflight's free-space check passes on any CI disk.
            "service_ceph_osd_size": "4G",
            "service_ceph_rgw_port": self.ports["rgw"],
            "service_ceph_rgw_bucket": BUCKET,
            "service_nfs_dir": str(self.nfs_dir),
            "service_nfs_export_path": str(self.export),
            "service_nfs_port": self.ports["nfs"],
            "service_nfs_mount_port": self.ports["mount"],
        }

    def cli(self) -> Cli:
        return Cli(self.root / "results")

    def ensure(self, *services: str) -> LabBox:
        """The box with `services` up: `./lab lab.services-up` as a user runs it, with the box's variables and
        address, for those and the ones already up (the ones up change nothing: a second start is a no-op)."""
        self.wait_started()
        if self.start_error is not None:
            raise self.start_error
        wanted = tuple(s for s in SERVICES if s in services or s in self.services)
        if wanted == self.services:
            return self
        self.vars_file.write_text(yaml.safe_dump(self.role_vars()))
        self.inventory.write_text("localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n")
        started = time.monotonic()
        self.services = wanted  # what the teardown stops, should the start fail midway
        argv = ["lab.services-up", "--bind", self.bind, "--services", ",".join(wanted), "--vars-file"]
        self.started = self.cli()(*argv, str(self.vars_file))
        self.timings["services-up " + ",".join(wanted)] = time.monotonic() - started
        return self

    def playbook(self, state: str, *extra: str, timing: str | None = None, timeout: float = 900):
        """ansible-playbook playbooks/services.yml on the box's services as the controller runs it; `timing` records
        it."""
        env = {
            **os.environ,
            "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
            "ANSIBLE_NOCOLOR": "1",
        }
        binds = {"service_ceph_bind_address": self.bind, "service_nfs_bind_address": self.bind}
        argv = [
            "ansible-playbook",
            "-i",
            str(self.inventory),
            str(PLAYBOOK),
            "-e",
            json.dumps({**self.role_vars(), **binds, "services_enabled": list(self.services)}),
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

    def ceph_fields(self) -> dict:
        """What an rbd, rbd_snapshot or cephfs backend of a campaign needs to reach the box."""
        c = self.ceph_client()
        return {"ceph_conf": c["conf"], "keyring": c["keyring"], "client": c["client_id"]}

    def s3_fields(self) -> dict:
        """What an s3 backend of a campaign needs to reach the box's radosgw."""
        s3 = self.ceph_client()["s3"]
        return {"endpoint": s3["endpoint"], "bucket": s3["bucket"], "credentials": s3["credentials"]}

    def unaccepted(self, health: dict) -> dict[str, str]:
        """The checks of a `ceph health` (or status's `health`) that the role does not accept of a one-node lab,
        with their messages: none is HEALTH_OK, or HEALTH_WARN for pools of size 1 or MON_DISK_LOW (a machine
        whose disk is more than 90 % full: this one's, some days); HEALTH_ERR is never accepted."""
        accepted = yaml.safe_load((ROOT / "roles/service_ceph/defaults/main.yml").read_text())
        checks = {
            name: check["summary"]["message"] + "; " + "; ".join(d["message"] for d in check.get("detail", [])[:2])
            for name, check in health.get("checks", {}).items()
        }
        left = {k: v for k, v in checks.items() if k not in accepted["service_ceph_health_ok_checks"]}
        return left or ({"status": health["status"]} if health["status"] == "HEALTH_ERR" else {})

    def assert_healthy(self) -> None:
        """Healthy as a one-node lab is (`unaccepted`), or an assertion naming each check and its first detail."""
        health = self.ceph("health", "detail")
        assert not self.unaccepted(health), f"{health['status']}: {self.unaccepted(health)}"

    def wait_settled(self, seconds: float = 180) -> None:
        """Wait until healthy as a one-node lab is (`unaccepted`) with every placement group active+clean, or an
        assertion naming the health and the states after `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            status = self.ceph("status")
            states = {s["state_name"] for s in status["pgmap"].get("pgs_by_state", [])}
            if not self.unaccepted(status["health"]) and states == {"active+clean"}:
                return
            if time.monotonic() >= deadline:
                raise AssertionError(f"the box is not healthy again: {status['health']}, {states}")
            time.sleep(2)

    def ceph(self, *args: str, fmt_json: bool = True, timeout: float = 60):
        """The ceph CLI as a later role uses it: conf, keyring and name from client.json."""
        c = self.ceph_client()
        argv = ["ceph", "--conf", c["conf"], "--keyring", c["keyring"], "--name", c["client_name"]]
        argv += ["--connect-timeout", "20", *args]
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
        for pid_file in sorted((self.ceph_dir / "run").glob("*.pid")):
            program = pid_file.name.split(".")[0]
            pids[pid_file.name] = (int(pid_file.read_text()), program)
        for name, comm in (("ganesha.pid", "ganesha.nfsd"), ("rpcbind.pid", "rpcbind")):
            pid_file = self.nfs_dir / "run" / name
            if pid_file.exists():
                pids[name] = (int(pid_file.read_text()), comm)
        return pids

    def tear_down(self) -> None:
        """Leave nothing behind, whatever state the tests left the box in: its daemons ended by the PIDs they wrote,
        what else still names its directory killed, the directory deleted.

        Not `lab.services-down --destroy` (30 s here with both services, 79 s at the end of a CI worker): the
        services' own stop and destroy are what test_services checks; the box's data goes with its directory, so
        Ceph's daemons are killed outright, while nfs-ganesha and rpcbind are asked first (TERM: ganesha takes its
        programs out of rpcbind's table as it exits)."""
        self.wait_started()
        started = time.monotonic()
        pids = self.daemon_pids() if self.root.exists() else {}
        for pid, comm in pids.values():
            if pid_alive(pid, comm):
                os.kill(pid, signal.SIGTERM if comm in ("ganesha.nfsd", "rpcbind") else signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(pid_alive(pid, comm) for pid, comm in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid, comm in pids.values():  # asked and still there
            if pid_alive(pid, comm):
                os.kill(pid, signal.SIGKILL)
        for pid, _ in processes_using(str(self.root)):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)
        self.timings["tear-down"] = time.monotonic() - started


@contextmanager
def lab_box(bind: str) -> Iterator[LabBox]:
    """A lab in a box bound to `bind` (nothing started until `LabBox.ensure`), torn down when the block ends."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="iolab-box-", dir="/tmp"))
    box = LabBox(root=root, bind=bind, ports=dict(zip(PORTS, free_ports(bind, len(PORTS)), strict=True)))
    try:
        yield box
    finally:
        box.tear_down()
        print("\nlab box timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in box.timings.items()))
