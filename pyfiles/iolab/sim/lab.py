"""What a simulated lab is (iolab.sim): its names, addresses and files, and what every step of bringing it up
or down uses: the checks it makes first, the lock it holds, the tools it runs and how."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from iolab.errors import UserError
from iolab.shared import processes

ADDRESS_BLOCK = "10.77"  # lab S is 10.77.S.0/24
GROUP = "gpu"
MAX_HOSTS = 99  # two-digit names; addresses .11 .. .109
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
LOCK_FILE = Path("/run/lock/iolab-sim.lock")

# Short enough that "v<name>-gpu01" fits the 15-byte interface name limit.
_LAB_NAME_RE = re.compile(r"^[a-z0-9]{1,8}$")
HOST_RE = re.compile(rf"^{GROUP}(\d\d)$")
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


def host_dir(lab_dir: Path, host: SimHost) -> Path:
    return lab_dir / "hosts" / host.name


def require_root(task: str) -> None:
    if os.geteuid() != 0:
        raise UserError(f"{task} needs root to create network namespaces; run it as root")


def checked_lab_dir(lab_dir: Path) -> Path:
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


def find_tools(required: tuple[str, ...] = tuple(_TOOLS)) -> dict[str, str]:
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
def lock(wait: float = 120.0) -> Iterator[None]:
    """One sim-up/sim-down at a time on this machine: the names they manage are global."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "a") as handle:
        if not processes.lock_within(handle.fileno(), wait):
            raise UserError(f"another lab.sim-up or lab.sim-down holds {LOCK_FILE}; wait for it to finish")
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run(argv: list[str], *, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise UserError(f"`{shlex.join(argv)}` failed: {detail[-1] if detail else f'exit {proc.returncode}'}")
    return proc
