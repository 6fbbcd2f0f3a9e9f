"""Simulated GPU hosts: network namespaces on a bridge, each with its own sshd.

    hosts = up(4, Path(".lab"), Path("inventory/sim.yml"))   # gpu01..gpu04, 10.77.0.11..14
    status(Path(".lab"))                                      # which of them answer
    down(Path(".lab"), Path("inventory/sim.yml"))             # nothing left behind

What `up` makes (and `down` removes):

    bridge iolab0 10.77.0.1/24 on the controller
    netns iolab-gpuNN, veth iolabv-gpuNN (bridge side) <-> eth0 10.77.0.(10+N)/24, lo up
    /etc/netns/iolab-gpuNN/{hosts,resolv.conf}   lab names; a resolver that fails at once
    <lab_dir>/ssh/id_ed25519[.pub]               the lab's login key (the authorized key)
    <lab_dir>/ssh/ssh_host_ed25519_key[.pub]     one host key for all simulated hosts
    <lab_dir>/hosts/gpuNN/sshd_config, sshd.pid, sshd.log, mntns
    <lab_dir>/cp/                                ssh ControlPersist sockets
    <inventory_path>                             Ansible inventory, group `gpu`

Each host's sshd runs in its namespace inside a private mount namespace with its own
UTS name (LAB_NOTES.md, "Simulated hosts"), so everything a session on gpu01 mounts
is visible on gpu01 only, and `hostname` answers gpu01.

**The file system is shared.** Only mounts are per host: every simulated host sees
the controller's root file system, /tmp, /var and loop devices. A role or benchmark
that writes outside its own mounts must key the path by inventory hostname
(`/var/tmp/iolab/{{ inventory_hostname }}/...`, `results/.../<host>/`), or the hosts
overwrite each other's files; and nothing may write /etc/fstab.

One lab per machine: the bridge, namespace names and addresses are global, so `up`
refuses to start over hosts that another lab directory still runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from iolab.errors import UserError

BRIDGE = "iolab0"
CONTROLLER_ADDRESS = "10.77.0.1"
PREFIX_LENGTH = 24
GROUP = "gpu"
MAX_HOSTS = 99  # two-digit names; addresses .11 .. .109
NETNS_PREFIX = "iolab-"
VETH_PREFIX = "iolabv-"  # bridge side; "iolabv-gpu01" fits the 15-byte interface name limit
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
LOCK_FILE = Path("/run/lock/iolab-sim.lock")

_HOST_RE = re.compile(rf"^{GROUP}(\d\d)$")
_NETNS_RE = re.compile(rf"^{NETNS_PREFIX}{GROUP}(\d\d)$")
# sshd_config and ssh expand %-tokens and split on blanks; keep lab paths plain.
_SAFE_PATH_RE = re.compile(r"^[A-Za-z0-9._/@+-]+$")
# A unix socket path holds 107 bytes; ssh's ControlPath is <cp dir>/<40 hex of %C>
# and ssh first binds it with a 17-byte random suffix.
_CONTROL_SOCKET_BUDGET = 107 - 1 - 40 - 17

_TOOLS = {  # command -> Debian package that provides it
    "ip": "iproute2",
    "unshare": "util-linux",
    "hostname": "hostname",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "sshd": "openssh-server",
}


@dataclasses.dataclass(frozen=True)
class SimHost:
    """One simulated host: gpu03 is netns iolab-gpu03 at 10.77.0.13."""

    name: str
    address: str
    namespace: str

    @classmethod
    def numbered(cls, number: int) -> SimHost:
        name = f"{GROUP}{number:02d}"
        return cls(name=name, address=f"10.77.0.{10 + number}", namespace=NETNS_PREFIX + name)

    @property
    def veth(self) -> str:
        return VETH_PREFIX + self.name


@dataclasses.dataclass(frozen=True)
class HostStatus:
    host: SimHost
    sshd_pid: int | None

    @property
    def up(self) -> bool:
        return self.sshd_pid is not None


# --------------------------------------------------------------------------- paths


def private_key(lab_dir: Path) -> Path:
    """The key that logs in as root on every simulated host."""
    return Path(lab_dir).absolute() / "ssh" / "id_ed25519"


def control_dir(lab_dir: Path) -> Path:
    return Path(lab_dir).absolute() / "cp"


def ssh_common_args(lab_dir: Path) -> list[str]:
    """The ssh options of the inventory, as an argv fragment (for Fabric, tests)."""
    return [
        "-o", "StrictHostKeyChecking=no",
        "-o", "UserKnownHostsFile=/dev/null",
        "-o", "ControlMaster=auto",
        "-o", "ControlPersist=60s",
        "-o", f"ControlPath={control_dir(lab_dir)}/%C",
    ]  # fmt: skip


def _host_dir(lab_dir: Path, host: SimHost) -> Path:
    return lab_dir / "hosts" / host.name


def _netns_etc(host: SimHost) -> Path:
    return Path("/etc/netns") / host.namespace


# --------------------------------------------------------------------------- public API


def up(count: int, lab_dir: Path, inventory_path: Path, *, timeout: float = 20.0) -> list[SimHost]:
    """Bring up gpu01..gpu<count> and write their inventory; return them.

    Idempotent: hosts already up are only verified; a larger count adds the missing
    ones (and tells the running ones the new names). A smaller count is refused.
    """
    if not 1 <= count <= MAX_HOSTS:
        raise UserError(f"--count must be between 1 and {MAX_HOSTS} (host names are gpu01..gpu99), not {count}")
    lab_dir = _checked_lab_dir(lab_dir)
    _require_root("lab.sim-up")
    tools = _find_tools()
    hosts = [SimHost.numbered(n) for n in range(1, count + 1)]
    with _lock():
        extra = sorted(name for name in _lab_namespaces() if int(_NETNS_RE.match(name)[1]) > count)
        if extra:
            raise UserError(
                f"simulated hosts beyond --count {count} are up ({', '.join(extra)}); "
                "run lab.sim-down first to shrink the lab"
            )
        key = _ensure_keys(lab_dir, tools)
        control_dir(lab_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        _ensure_bridge(tools)
        for host in hosts:
            _ensure_network(host, tools)
        for host in hosts:
            _write_netns_etc(host, hosts)
        for host in hosts:
            _ensure_sshd(host, lab_dir, tools)
        _wait_for_pid_files(hosts, lab_dir, timeout)
        _wait_for_ssh(hosts, lab_dir, key, tools, timeout)
        _write_inventory(inventory_path, hosts, lab_dir)
    return hosts


def down(lab_dir: Path, inventory_path: Path) -> None:
    """Remove everything `up` made; fine to run when nothing is up."""
    lab_dir = Path(lab_dir).absolute()
    _require_root("lab.sim-down")
    tools = _find_tools(required=("ip", "ssh"))
    with _lock():
        _close_control_masters(control_dir(lab_dir), tools)
        namespaces = _lab_namespaces()
        names = set(namespaces)
        names.update(p.name for p in Path("/etc/netns").glob(f"{NETNS_PREFIX}*") if _NETNS_RE.match(p.name))
        hosts_dir = lab_dir / "hosts"
        if hosts_dir.is_dir():
            names.update(NETNS_PREFIX + p.name for p in hosts_dir.iterdir() if _HOST_RE.match(p.name))
        hosts = [SimHost.numbered(int(_NETNS_RE.match(n)[1])) for n in sorted(names)]
        _end_processes(hosts, lab_dir, tools)
        # Deleting the veth from the bridge side removes both ends at once; leaving it
        # to the namespace's (asynchronous) cleanup races a quick sim-up that follows.
        for link in _links(tools):
            if link.startswith(VETH_PREFIX):
                _run([tools["ip"], "link", "del", "dev", link], check=False)
        for host in hosts:
            if host.namespace in namespaces:
                _run([tools["ip"], "netns", "del", host.namespace], check=False)
            shutil.rmtree(_netns_etc(host), ignore_errors=True)
        with contextlib.suppress(OSError):
            Path("/etc/netns").rmdir()  # only if empty
        _run([tools["ip"], "link", "del", "dev", BRIDGE], check=False)
        leftovers = [link for link in _links(tools) if link == BRIDGE or link.startswith(VETH_PREFIX)]
        leftovers += _lab_namespaces()
        if leftovers:
            raise UserError(f"lab.sim-down could not remove {', '.join(leftovers)}; see `ip link` / `ip netns`")
        Path(inventory_path).unlink(missing_ok=True)
        for sub in ("hosts", "cp", "ssh"):
            shutil.rmtree(lab_dir / sub, ignore_errors=True)


def running() -> list[str]:
    """The simulated hosts' namespaces up on this machine, whichever lab directory made them."""
    return _lab_namespaces()


def kill(lab_dir: Path, name: str) -> None:
    """Simulate a host failure: end its sshd and every process in it; its mounts go with them.

    `up` brings it back (a fresh sshd, an empty mount namespace).
    """
    _require_root("simulating a host failure")
    match = _HOST_RE.match(name)
    if not match:
        raise UserError(f"{name!r} is not a simulated host name (gpu01 … gpu{MAX_HOSTS})")
    _end_processes([SimHost.numbered(int(match.group(1)))], lab_dir, _find_tools())


def status(lab_dir: Path) -> list[HostStatus]:
    """The hosts `up` made from this lab directory, each with its sshd's PID if it runs."""
    lab_dir = Path(lab_dir).absolute()
    hosts_dir = lab_dir / "hosts"
    if not hosts_dir.is_dir():
        return []
    numbers = sorted(int(m[1]) for p in hosts_dir.iterdir() if (m := _HOST_RE.match(p.name)))
    hosts = [SimHost.numbered(n) for n in numbers]
    return [HostStatus(host, _running_sshd(lab_dir, host)) for host in hosts]


# --------------------------------------------------------------------------- checks


def _require_root(task: str) -> None:
    if os.geteuid() != 0:
        raise UserError(f"{task} needs root to create network namespaces; run it as root")


def _checked_lab_dir(lab_dir: Path) -> Path:
    lab_dir = Path(lab_dir).absolute()
    if not _SAFE_PATH_RE.match(str(lab_dir)):
        raise UserError(
            f"lab directory {lab_dir} has characters sshd and ssh would misread "
            "(blanks, quotes, %); use a path of letters, digits and ._-/"
        )
    if len(str(control_dir(lab_dir))) > _CONTROL_SOCKET_BUDGET:
        raise UserError(
            f"lab directory {lab_dir} is too long for ssh control sockets (unix socket paths "
            f"hold 107 bytes); use a path of at most {_CONTROL_SOCKET_BUDGET - 3} characters"
        )
    return lab_dir


def _find_tools(required: tuple[str, ...] = tuple(_TOOLS)) -> dict[str, str]:
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
    tools: dict[str, str] = {}
    for name in required:
        found = shutil.which(name, path=search)
        if found is None:
            raise UserError(f"{name} is not installed; install the Debian package {_TOOLS[name]}")
        tools[name] = found
    if "sshd" in required and not os.access(SFTP_SERVER, os.X_OK):
        raise UserError(f"{SFTP_SERVER} is missing; install the Debian package openssh-sftp-server")
    return tools


@contextlib.contextmanager
def _lock(wait: float = 120.0) -> Iterator[None]:
    """One sim-up/sim-down at a time on this machine: the names they manage are global."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "a") as handle:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise UserError(
                        f"another lab.sim-up or lab.sim-down holds {LOCK_FILE}; wait for it to finish"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- commands


def _run(argv: list[str], *, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise UserError(f"`{shlex.join(argv)}` failed: {detail[-1] if detail else f'exit {proc.returncode}'}")
    return proc


def _lab_namespaces() -> list[str]:
    netns_dir = Path("/run/netns")  # where `ip netns add` pins namespaces
    if not netns_dir.is_dir():
        return []
    return sorted(p.name for p in netns_dir.iterdir() if _NETNS_RE.match(p.name))


def _links(tools: dict[str, str], namespace: str | None = None) -> list[str]:
    argv = [tools["ip"], "-j"] + (["-n", namespace] if namespace else []) + ["link", "show"]
    proc = _run(argv, check=False)
    if proc.returncode != 0:
        return []
    return [link["ifname"] for link in json.loads(proc.stdout or "[]")]


# --------------------------------------------------------------------------- up: pieces


def _ensure_keys(lab_dir: Path, tools: dict[str, str]) -> Path:
    ssh_dir = lab_dir / "ssh"
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for key, comment in ((private_key(lab_dir), "iolab-lab"), (ssh_dir / "ssh_host_ed25519_key", "iolab-sim-host")):
        public = key.with_name(key.name + ".pub")
        if not key.exists():
            public.unlink(missing_ok=True)
            _run([tools["ssh-keygen"], "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)])
        elif not public.exists():
            public.write_text(_run([tools["ssh-keygen"], "-y", "-f", str(key)]).stdout)
    return private_key(lab_dir)


def _ensure_bridge(tools: dict[str, str]) -> None:
    ip = tools["ip"]
    if BRIDGE not in _links(tools):
        _run([ip, "link", "add", "name", BRIDGE, "type", "bridge"])
    _run([ip, "addr", "replace", f"{CONTROLLER_ADDRESS}/{PREFIX_LENGTH}", "dev", BRIDGE])
    _run([ip, "link", "set", "dev", BRIDGE, "up"])


def _ensure_network(host: SimHost, tools: dict[str, str]) -> None:
    ip, ns = tools["ip"], host.namespace
    if ns not in _lab_namespaces():
        _run([ip, "netns", "add", ns])
    if host.veth not in _links(tools):
        # A namespace left without its veth may still hold the old peer's name.
        _run([ip, "-n", ns, "link", "del", "dev", "eth0"], check=False)
        _run([ip, "link", "add", "name", host.veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    _run([ip, "link", "set", "dev", host.veth, "master", BRIDGE, "up"])
    _run([ip, "-n", ns, "addr", "replace", f"{host.address}/{PREFIX_LENGTH}", "dev", "eth0"])
    _run([ip, "-n", ns, "link", "set", "dev", "eth0", "up"])
    _run([ip, "-n", ns, "link", "set", "dev", "lo", "up"])


def _write_netns_etc(host: SimHost, hosts: list[SimHost]) -> None:
    """/etc/hosts and /etc/resolv.conf as the host's processes see them.

    Without them every name lookup in a namespace waits 10 s on the controller's
    unreachable resolver (LAB_NOTES.md). `ip netns exec` bind-mounts these files, so
    they are rewritten in place: a new inode would not reach an sshd already running.
    """
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", f"{CONTROLLER_ADDRESS}\tcontroller"]
    lines += [f"{h.address}\t{h.name}" for h in hosts]
    etc = _netns_etc(host)
    etc.mkdir(parents=True, exist_ok=True)
    for name, text in (("hosts", "\n".join(lines) + "\n"), ("resolv.conf", "nameserver 127.0.0.1\n")):
        path = etc / name
        if not path.exists() or path.read_text() != text:
            with open(path, "w") as handle:
                handle.write(text)


def _sshd_config(host: SimHost, lab_dir: Path) -> str:
    host_dir = _host_dir(lab_dir, host)
    return "\n".join([
        f"# Generated by iolab lab.sim-up for {host.name}; lab.sim-down removes it.",
        f"ListenAddress {host.address}:22",
        f"PidFile {host_dir / 'sshd.pid'}",
        f"HostKey {lab_dir / 'ssh' / 'ssh_host_ed25519_key'}",
        f"AuthorizedKeysFile {private_key(lab_dir)}.pub",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        # Ansible forks and Fabric open several sessions at once.
        "MaxSessions 32",
        "MaxStartups 64:30:128",
        f"Subsystem sftp {SFTP_SERVER}",
        "",
    ])  # fmt: skip


def _running_sshd(lab_dir: Path, host: SimHost) -> int | None:
    """The PID in the host's PidFile, if that process lives and is our sshd."""
    host_dir = _host_dir(lab_dir, host)
    try:
        pid = int((host_dir / "sshd.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    # sshd rewrites its title ("sshd: /usr/sbin/sshd -f CFG ... [listener] ..."): a substring test.
    if str(host_dir / "sshd_config").encode() not in cmdline or not _alive(pid):
        return None  # a stale PID file, maybe a recycled PID
    return pid


def _ensure_sshd(host: SimHost, lab_dir: Path, tools: dict[str, str]) -> None:
    """Start the host's sshd unless it runs with the current configuration."""
    host_dir = _host_dir(lab_dir, host)
    host_dir.mkdir(parents=True, exist_ok=True)
    config = host_dir / "sshd_config"
    text = _sshd_config(host, lab_dir)
    pid = _running_sshd(lab_dir, host)
    if pid is not None and config.exists() and config.read_text() == text:
        return
    if pid is not None:  # same host, other settings (an older iolab): restart it
        _end_processes([host], lab_dir, tools)
    leftovers = _run([tools["ip"], "netns", "pids", host.namespace]).stdout.split()
    if leftovers and (host_dir / "mntns").exists():
        # This lab's host lost its sshd (a simulated host failure): reboot it cleanly.
        _end_processes([host], lab_dir, tools)
    elif leftovers:
        raise UserError(
            f"{host.name}'s namespace {host.namespace} already runs processes ({', '.join(leftovers)}) "
            f"not started from {lab_dir} (another lab?); run lab.sim-down first"
        )
    config.write_text(text)
    (host_dir / "sshd.pid").unlink(missing_ok=True)
    log = host_dir / "sshd.log"
    # sh gets the values as "$1".."$4": nothing is formatted into the script.
    script = 'hostname "$1" && exec "$2" -f "$3" -E "$4"'
    argv = [
        tools["ip"], "netns", "exec", host.namespace,
        tools["unshare"], "--mount", "--uts", "--propagation", "private",
        "/bin/sh", "-c", script, "sh", host.name, tools["sshd"], str(config), str(log),
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:  # sshd checks its config before it daemonizes
        reason = _last_line(log) or proc.stderr.strip() or f"exit {proc.returncode}"
        raise UserError(f"sshd of {host.name} did not start: {reason} (log: {log})")


def _wait_for_pid_files(hosts: list[SimHost], lab_dir: Path, timeout: float) -> None:
    """sshd writes its PidFile once it listens; record its mount namespace for `down`."""
    deadline = time.monotonic() + timeout
    waiting = list(hosts)
    while waiting:
        for host in list(waiting):
            pid = _running_sshd(lab_dir, host)
            if pid is not None:
                record = _host_dir(lab_dir, host) / "mntns"
                mntns = os.readlink(f"/proc/{pid}/ns/mnt") + "\n"
                if not record.exists() or record.read_text() != mntns:
                    record.write_text(mntns)
                waiting.remove(host)
        if waiting and time.monotonic() > deadline:
            host = waiting[0]
            log = _host_dir(lab_dir, host) / "sshd.log"
            raise UserError(
                f"sshd of {host.name} wrote no PID file within {timeout:.0f} s: "
                f"{_last_line(log) or 'no log line'} (log: {log}); run lab.sim-down and try again"
            )
        if waiting:
            time.sleep(0.02)


def _wait_for_ssh(hosts: list[SimHost], lab_dir: Path, key: Path, tools: dict[str, str], timeout: float) -> None:
    """Log in to every host with the lab key (in parallel) until each names itself."""
    deadline = time.monotonic() + timeout
    pending = {host.name: host for host in hosts}
    errors: dict[str, str] = {}
    while pending:
        procs = {
            name: subprocess.Popen(
                [
                    tools["ssh"], "-F", "/dev/null", "-i", str(key),
                    "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                    "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                    "-o", "ControlMaster=no", "-o", "ControlPath=none",
                    "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR",
                    f"root@{host.address}", "hostname",
                ],  # fmt: skip
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, host in pending.items()
        }
        for name, proc in procs.items():
            try:
                stdout, stderr = proc.communicate(timeout=max(deadline - time.monotonic(), 10.0))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                errors[name] = "ssh hung"
                continue
            answer = stdout.strip().splitlines()[-1:]  # a login script may print first
            if proc.returncode == 0 and answer == [name]:
                del pending[name]
            elif proc.returncode == 0:
                errors[name] = f"it calls itself {answer[0] if answer else 'nothing'!r}"
            else:
                errors[name] = stderr.strip().splitlines()[-1] if stderr.strip() else f"ssh exit {proc.returncode}"
        if pending and time.monotonic() > deadline:
            name = sorted(pending)[0]
            raise UserError(
                f"simulated host {name} ({pending[name].address}) does not accept SSH with the lab key "
                f"after {timeout:.0f} s: {errors[name]}; see {_host_dir(lab_dir, pending[name]) / 'sshd.log'}"
            )
        if pending:
            time.sleep(0.2)


def _write_inventory(path: Path, hosts: list[SimHost], lab_dir: Path) -> None:
    inventory = {
        "all": {
            "children": {
                GROUP: {
                    "hosts": {
                        h.name: {
                            "ansible_host": h.address,
                            "ansible_user": "root",
                            "ansible_ssh_private_key_file": str(private_key(lab_dir)),
                        }
                        for h in hosts
                    },
                    "vars": {
                        "ansible_ssh_common_args": shlex.join(ssh_common_args(lab_dir)),
                        "ansible_python_interpreter": "/usr/bin/python3",
                        "ansible_pipelining": True,
                    },
                }
            }
        }
    }
    text = "# Generated by iolab lab.sim-up; lab.sim-down removes it. Do not edit.\n"
    text += yaml.safe_dump(inventory, sort_keys=False, default_flow_style=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- down: pieces


def _close_control_masters(cp_dir: Path, tools: dict[str, str]) -> None:
    """Ask each ControlPersist master (Ansible's, Fabric's, ours) to exit."""
    if not cp_dir.is_dir():
        return
    sockets = [p for p in cp_dir.iterdir() if p.is_socket()]
    procs = [
        subprocess.Popen(
            [tools["ssh"], "-F", "/dev/null", "-o", f"ControlPath={sock}", "-O", "exit", "iolab-sim"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for sock in sockets
    ]
    for proc in procs:
        proc.wait(timeout=10)
    for sock in sockets:
        sock.unlink(missing_ok=True)  # a master that died left its socket


def _end_processes(hosts: list[SimHost], lab_dir: Path, tools: dict[str, str]) -> None:
    """End every process of the hosts: sshd, its sessions, what they started.

    A mount namespace lives as long as a process is in it, so this is also what
    removes the hosts' mounts.
    """
    pids: set[int] = set()
    mount_namespaces: set[str] = set()
    for host in hosts:
        if (pid := _running_sshd(lab_dir, host)) is not None:
            pids.add(pid)
        with contextlib.suppress(OSError):
            mount_namespaces.add((_host_dir(lab_dir, host) / "mntns").read_text().strip())
        if host.namespace in _lab_namespaces():
            pids.update(int(p) for p in _run([tools["ip"], "netns", "pids", host.namespace]).stdout.split())
    if mount_namespaces:
        pids.update(_pids_in_mount_namespaces(mount_namespaces))
    pids.discard(os.getpid())
    _terminate(sorted(pids))


def _pids_in_mount_namespaces(namespaces: set[str]) -> set[int]:
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry.name}/ns/mnt") in namespaces:
                    found.add(int(entry.name))
    return found


def _terminate(pids: list[int], grace: float = 5.0) -> None:
    """SIGTERM, wait, SIGKILL what is left, wait; raise if something survives."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while (pids := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not pids:
            return
    raise UserError(f"processes {', '.join(map(str, pids))} of the simulated hosts survived SIGKILL")


def _alive(pid: int) -> bool:
    """True unless the process is gone or a zombie (whoever reaps it may be slow)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""
