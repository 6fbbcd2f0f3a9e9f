"""Simulated GPU hosts: network namespaces on a bridge, each with its own sshd.

    lab = for_checkout()                 # this checkout's lab (or for_checkout("b"), $IOLAB_LAB)
    hosts = up(4, lab)                   # gpu01..gpu04 at 10.77.<S>.11..14, inventory written
    status(lab)                          # which of them answer
    down(lab)                            # nothing of this lab left behind; other labs untouched

Several labs can be up on one machine at once (one per checkout, say). Everything a
lab makes machine-wide carries its name L (1 to 8 of a-z0-9; by default a short hash
of the checkout's path), and its subnet S comes from a registry, so that no two labs
share a bridge or an address block:

    registry /run/iolab-sim/labs.json    L -> subnet S, lab directory, since when
    bridge iolab-L 10.77.S.1/24 on the controller (the address lab services bind to)
    netns iolab-L-gpuNN, veth vL-gpuNN (bridge side) <-> eth0 10.77.S.(10+N)/24, lo up
    /etc/netns/iolab-L-gpuNN/{hosts,resolv.conf}   lab names; a resolver that fails at once
    <lab dir>/ssh/id_ed25519[.pub]                 the lab's login key (the authorized key)
    <lab dir>/ssh/ssh_host_ed25519_key[.pub]       one host key for all its simulated hosts
    <lab dir>/hosts/gpuNN/sshd_config, sshd.pid, sshd.log, mntns
    <lab dir>/cp/                                  ssh ControlPersist sockets
    <inventory>                                    Ansible inventory, group `gpu`

The inventory names stay gpu01..gpuNN in every lab: two labs' gpu01 are different
hosts with the same inventory name, reached at different addresses.

Each host's sshd runs in its namespace inside a private mount namespace with its own
UTS name, so everything a session on gpu01 mounts
is visible on gpu01 only, and `hostname` answers gpu01.

**The file system is shared.** Only mounts are per host: every simulated host sees
the controller's root file system, /tmp, /var and loop devices. A role or benchmark
that writes outside its own mounts must key the path by inventory hostname
(`/var/tmp/iolab/{{ inventory_hostname }}/...`, `results/.../<host>/`), or the hosts
overwrite each other's files; and nothing may write /etc/fstab.
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

ADDRESS_BLOCK = "10.77"  # lab S is 10.77.S.0/24
PREFIX_LENGTH = 24
MAX_LABS = 255  # subnets 10.77.0 .. 10.77.254
GROUP = "gpu"
MAX_HOSTS = 99  # two-digit names; addresses .11 .. .109
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
LOCK_FILE = Path("/run/lock/iolab-sim.lock")
# In /run, as the namespaces are: a reboot clears both together.
REGISTRY = Path("/run/iolab-sim/labs.json")

# Short enough that "v<name>-gpu01" fits the 15-byte interface name limit.
_LAB_NAME_RE = re.compile(r"^[a-z0-9]{1,8}$")
_HOST_RE = re.compile(rf"^{GROUP}(\d\d)$")
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
class Lab:
    """One simulated lab: its name marks what it makes machine-wide; its directory holds its files."""

    name: str
    dir: Path
    inventory: Path

    def __post_init__(self) -> None:
        if not _LAB_NAME_RE.match(self.name):
            raise UserError(
                f"lab name {self.name!r} must be 1 to 8 lower-case letters or digits "
                "(it goes into network interface names); pass another --lab or $IOLAB_LAB"
            )

    @property
    def bridge(self) -> str:
        return f"iolab-{self.name}"

    @property
    def namespace_prefix(self) -> str:
        return f"iolab-{self.name}-"

    def host(self, number: int, subnet: int) -> SimHost:
        name = f"{GROUP}{number:02d}"
        return SimHost(
            name=name,
            address=f"{ADDRESS_BLOCK}.{subnet}.{10 + number}",
            namespace=self.namespace_prefix + name,
            veth=f"v{self.name}-{name}",
        )


@dataclasses.dataclass(frozen=True)
class SimHost:
    """One simulated host: gpu03 of lab L (subnet S) is netns iolab-L-gpu03 at 10.77.S.13, veth vL-gpu03."""

    name: str
    address: str
    namespace: str
    veth: str


@dataclasses.dataclass(frozen=True)
class HostStatus:
    host: SimHost
    sshd_pid: int | None

    @property
    def up(self) -> bool:
        return self.sshd_pid is not None


def for_checkout(name: str | None = None) -> Lab:
    """The lab of this checkout: `name`, else $IOLAB_LAB, else a short hash of the checkout's path.

    The checkout's own lab writes inventory/sim.yml; a named one inventory/sim-<name>.yml.
    """
    from iolab import paths

    chosen = name or os.environ.get("IOLAB_LAB") or paths.checkout_lab_name()
    inventory = (
        paths.SIM_INVENTORY
        if chosen == paths.checkout_lab_name()
        else paths.SIM_INVENTORY.with_name(f"sim-{chosen}.yml")
    )
    return Lab(name=chosen, dir=paths.LAB_DIR / "sim" / chosen, inventory=inventory)


def controller_address(subnet: int) -> str:
    """The controller's address on a lab's bridge: what lab services bind to for its hosts."""
    return f"{ADDRESS_BLOCK}.{subnet}.1"


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


def up(count: int, lab: Lab, *, timeout: float = 20.0) -> list[SimHost]:
    """Bring up the lab's gpu01..gpu<count> and write its inventory; return them.

    Idempotent: hosts already up are only verified; a larger count adds the missing
    ones (and tells the running ones the new names). A smaller count is refused, and
    so is a lab name another lab directory has up.
    """
    if not 1 <= count <= MAX_HOSTS:
        raise UserError(f"--count must be between 1 and {MAX_HOSTS} (host names are gpu01..gpu99), not {count}")
    lab = dataclasses.replace(lab, dir=_checked_lab_dir(lab.dir))
    _require_root("lab.sim-up")
    tools = _find_tools()
    with _lock():
        subnet = _register(lab, tools)
        hosts = [lab.host(n, subnet) for n in range(1, count + 1)]
        extra = sorted(ns for ns, number in _lab_namespaces(lab).items() if number > count)
        if extra:
            raise UserError(
                f"simulated hosts beyond --count {count} are up in lab {lab.name} ({', '.join(extra)}); "
                "run lab.sim-down first to shrink the lab"
            )
        key = _ensure_keys(lab.dir, tools)
        control_dir(lab.dir).mkdir(mode=0o700, parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        _ensure_bridge(lab, subnet, tools)
        for host in hosts:
            _ensure_network(lab, host, tools)
        for host in hosts:
            _write_netns_etc(host, hosts, controller_address(subnet))
        for host in hosts:
            _ensure_sshd(host, lab.dir, tools)
        _wait_for_pid_files(hosts, lab.dir, timeout)
        _wait_for_ssh(hosts, lab.dir, key, tools, timeout)
        _write_inventory(lab.inventory, hosts, lab.dir)
    return hosts


def down(lab: Lab) -> bool:
    """Remove everything `up` made for this lab, and nothing of another; False if it was not up."""
    lab_dir = Path(lab.dir).absolute()
    _require_root("lab.sim-down")
    tools = _find_tools(required=("ip", "ssh"))
    with _lock():
        entry = _registry().get(lab.name)
        if entry and entry["dir"] != str(lab_dir) and _bridge_up(lab, tools):
            raise UserError(
                f"lab {lab.name} was brought up from {entry['dir']}, not {lab_dir}; take it down from there"
            )
        namespaces = _lab_namespaces(lab)
        numbers = set(namespaces.values())
        numbers.update(
            int(m[1])
            for p in Path("/etc/netns").glob(f"{lab.namespace_prefix}*")
            if (m := re.match(rf"^{re.escape(lab.namespace_prefix)}{GROUP}(\d\d)$", p.name))
        )
        hosts_dir = lab_dir / "hosts"
        if hosts_dir.is_dir():
            numbers.update(int(m[1]) for p in hosts_dir.iterdir() if (m := _HOST_RE.match(p.name)))
        links = [link for link in _links(tools) if link == lab.bridge or link.startswith(f"v{lab.name}-")]
        if not (entry or numbers or links or lab.inventory.exists()):
            return False
        _close_control_masters(control_dir(lab_dir), tools)
        hosts = [lab.host(n, entry["subnet"] if entry else 0) for n in sorted(numbers)]
        _end_processes(hosts, lab_dir, tools)
        # Deleting the veth from the bridge side removes both ends at once; leaving it
        # to the namespace's (asynchronous) cleanup races a quick sim-up that follows.
        for link in links:
            if link != lab.bridge:
                _run([tools["ip"], "link", "del", "dev", link], check=False)
        for host in hosts:
            if host.namespace in namespaces:
                _run([tools["ip"], "netns", "del", host.namespace], check=False)
            shutil.rmtree(_netns_etc(host), ignore_errors=True)
        with contextlib.suppress(OSError):
            Path("/etc/netns").rmdir()  # only if empty
        if lab.bridge in links:
            _run([tools["ip"], "link", "del", "dev", lab.bridge], check=False)
        leftovers = [link for link in _links(tools) if link == lab.bridge or link.startswith(f"v{lab.name}-")]
        leftovers += list(_lab_namespaces(lab))
        if leftovers:
            raise UserError(f"lab.sim-down could not remove {', '.join(leftovers)}; see `ip link` / `ip netns`")
        _unregister(lab)
        Path(lab.inventory).unlink(missing_ok=True)
        for sub in ("hosts", "cp", "ssh"):
            shutil.rmtree(lab_dir / sub, ignore_errors=True)
    return True


def labs() -> dict[str, dict]:
    """The labs up on this machine, whichever checkout made them: name -> subnet, dir, since."""
    return _registry()


def subnet_of(lab: Lab) -> int | None:
    """The lab's subnet S (10.77.S.0/24) while it is up, else None."""
    entry = _registry().get(lab.name)
    return entry["subnet"] if entry else None


def kill(lab: Lab, name: str) -> None:
    """Simulate a host failure: end its sshd and every process in it; its mounts go with them.

    `up` brings it back (a fresh sshd, an empty mount namespace).
    """
    _require_root("simulating a host failure")
    match = _HOST_RE.match(name)
    if not match:
        raise UserError(f"{name!r} is not a simulated host name (gpu01 … gpu{MAX_HOSTS})")
    _end_processes([lab.host(int(match.group(1)), subnet_of(lab) or 0)], Path(lab.dir).absolute(), _find_tools())


def status(lab: Lab) -> list[HostStatus]:
    """The hosts `up` made in this lab, each with its sshd's PID if it runs."""
    lab_dir = Path(lab.dir).absolute()
    hosts_dir = lab_dir / "hosts"
    if not hosts_dir.is_dir():
        return []
    numbers = sorted(int(m[1]) for p in hosts_dir.iterdir() if (m := _HOST_RE.match(p.name)))
    subnet = subnet_of(lab) or 0
    return [HostStatus(host, _running_sshd(lab_dir, host)) for host in (lab.host(n, subnet) for n in numbers)]


# --------------------------------------------------------------------------- the registry


def _registry() -> dict[str, dict]:
    try:
        return json.loads(REGISTRY.read_text())
    except FileNotFoundError:
        return {}
    except ValueError:
        raise UserError(f"{REGISTRY} is not JSON; remove it after checking `ip netns` for labs still up") from None


def _write_registry(labs_up: dict[str, dict]) -> None:
    REGISTRY.parent.mkdir(parents=True, exist_ok=True)
    tmp = REGISTRY.with_name(f".{REGISTRY.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(labs_up, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, REGISTRY)


def _bridge_up(lab: Lab, tools: dict[str, str]) -> bool:
    return lab.bridge in _links(tools)


def _register(lab: Lab, tools: dict[str, str]) -> int:
    """The lab's subnet: its own if registered, else the lowest that no lab and no interface uses."""
    labs_up = _registry()
    entry = labs_up.get(lab.name)
    if entry and entry["dir"] != str(lab.dir):
        if _bridge_up(lab, tools) or _lab_namespaces(lab):
            raise UserError(
                f"lab {lab.name} is up from {entry['dir']}; name this one differently with --lab NAME or $IOLAB_LAB"
            )
        entry = None  # left by a lab that is gone
    if entry is None:
        taken = {e["subnet"] for name, e in labs_up.items() if name != lab.name} | _subnets_in_use(tools)
        free = [s for s in range(MAX_LABS) if s not in taken]
        if not free:
            raise UserError(f"every subnet {ADDRESS_BLOCK}.0-254.0/24 is in use; take a lab down first")
        entry = {"subnet": free[0], "dir": str(lab.dir), "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        _write_registry({**labs_up, lab.name: entry})
    return entry["subnet"]


def _unregister(lab: Lab) -> None:
    labs_up = _registry()
    if labs_up.pop(lab.name, None) is not None:
        _write_registry(labs_up)


def _subnets_in_use(tools: dict[str, str]) -> set[int]:
    """Third octets of the 10.77.x.y addresses on this machine's interfaces (another lab, anything)."""
    proc = _run([tools["ip"], "-j", "-4", "addr", "show"], check=False)
    found = set()
    for link in json.loads(proc.stdout or "[]") if proc.returncode == 0 else []:
        for addr in link.get("addr_info", []):
            parts = addr.get("local", "").split(".")
            if ".".join(parts[:2]) == ADDRESS_BLOCK and len(parts) == 4:
                found.add(int(parts[2]))
    return found


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


def _lab_namespaces(lab: Lab) -> dict[str, int]:
    """The lab's namespaces up on this machine, each with its host number."""
    netns_dir = Path("/run/netns")  # where `ip netns add` pins namespaces
    if not netns_dir.is_dir():
        return {}
    pattern = re.compile(rf"^{re.escape(lab.namespace_prefix)}{GROUP}(\d\d)$")
    return {p.name: int(m[1]) for p in sorted(netns_dir.iterdir()) if (m := pattern.match(p.name))}


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


def _ensure_bridge(lab: Lab, subnet: int, tools: dict[str, str]) -> None:
    ip = tools["ip"]
    if lab.bridge not in _links(tools):
        _run([ip, "link", "add", "name", lab.bridge, "type", "bridge"])
    _run([ip, "addr", "replace", f"{controller_address(subnet)}/{PREFIX_LENGTH}", "dev", lab.bridge])
    _run([ip, "link", "set", "dev", lab.bridge, "up"])


def _ensure_network(lab: Lab, host: SimHost, tools: dict[str, str]) -> None:
    ip, ns = tools["ip"], host.namespace
    if ns not in _lab_namespaces(lab):
        _run([ip, "netns", "add", ns])
    if host.veth not in _links(tools):
        # A namespace left without its veth may still hold the old peer's name.
        _run([ip, "-n", ns, "link", "del", "dev", "eth0"], check=False)
        _run([ip, "link", "add", "name", host.veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    _run([ip, "link", "set", "dev", host.veth, "master", lab.bridge, "up"])
    _run([ip, "-n", ns, "addr", "replace", f"{host.address}/{PREFIX_LENGTH}", "dev", "eth0"])
    _run([ip, "-n", ns, "link", "set", "dev", "eth0", "up"])
    _run([ip, "-n", ns, "link", "set", "dev", "lo", "up"])


def _write_netns_etc(host: SimHost, hosts: list[SimHost], controller: str) -> None:
    """/etc/hosts and /etc/resolv.conf as the host's processes see them.

    Without them every name lookup in a namespace waits 10 s on the controller's
    unreachable resolver. `ip netns exec` bind-mounts these files, so
    they are rewritten in place: a new inode would not reach an sshd already running.
    """
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", f"{controller}\tcontroller"]
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
                    tools["ssh"],
                    "-F",
                    "/dev/null",
                    "-i",
                    str(key),
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "IdentitiesOnly=yes",
                    "-o",
                    "StrictHostKeyChecking=no",
                    "-o",
                    "UserKnownHostsFile=/dev/null",
                    "-o",
                    "ControlMaster=no",
                    "-o",
                    "ControlPath=none",
                    "-o",
                    "ConnectTimeout=5",
                    "-o",
                    "LogLevel=ERROR",
                    f"root@{host.address}",
                    "hostname",
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
                        # The controller's root file system and package database, no route to a
                        # mirror: the iolab_host role installs their packages once, on the controller.
                        "iolab_host_shared_root": True,
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
        if Path("/run/netns", host.namespace).exists():
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
