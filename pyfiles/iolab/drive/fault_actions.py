"""What each fault kind does to the storage, on the controller: inject it, heal it, and check first that it can.

Ceph's kinds go through the ceph CLI with the backend's ceph_conf, keyring and client. A daemon's (osd_stop,
nfs_stop, rgw_stop) is stopped by the PID its PID file names, and only when that process has the command line
the lab's role started it with (client.json's `daemons`, roles/service_ceph and service_nfs): iolab never
signals a process it did not start. It is started again with that command line. A host's link goes down and up
by the inventory's argv (`iolab_link_down`, `iolab_link_up`: a simulated host's own, `ip -n NAMESPACE link set
eth0 down`; on a real lab, whatever takes the link down from the controller: a switch's or BMC's command); a
tool is killed through `hostrun kill` on its host. A campaign's command is its argv, never a shell; one that
has not ended within CLI_S, or when the run ends, is killed with its session and is a failed action.

Every action returns (ok, what happened), its error said in a line; nothing here raises for a fault that fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iolab.backends.base import LAB_CEPH_DIR, Backend, CephBackend
from iolab.campaign.hosts import Inventory
from iolab.drive import direct
from iolab.errors import UserError
from iolab.faults import AnyFault, CommandFault, HostFault, NooutFault, OsdFault
from iolab.shared.processes import alive

CLI_S = 60.0  # s a ceph command, a link's argv or a campaign's command may take
STOP_S = 60.0  # s a daemon has to exit on SIGTERM before SIGKILL (the role's service_*_stop_timeout)
START_S = 60.0  # s a daemon started again has to write its PID file and run
LAB_NFS_DIR = "/var/lib/iolab/nfs"  # roles/service_nfs's default service_nfs_dir
LINK_VARS = ("iolab_link_down", "iolab_link_up")  # inventory variables: argv lists run on the controller
DAEMON_TYPES = {"osd_stop": "osd", "nfs_stop": "ganesha", "rgw_stop": "rgw"}

Outcome = tuple[bool, str]


@dataclasses.dataclass(frozen=True)
class Context:
    """What an action needs: the run's backend, the inventory (links, tool_kill's ssh), each host's run directory
    and the host-side command prefix (`env PYTHONPATH=<release> <python>`)."""

    backend: Backend
    inventory: Inventory
    run_dirs: dict[str, str]
    host_python: list[str]


def run_argv(argv: list[str], timeout: float = CLI_S, stop: threading.Event | None = None) -> Outcome:
    """An argv on the controller, never through a shell: (exit status 0, its last line). Its output goes to a file,
    not a pipe: a daemon it starts may keep the pipe open long after the argv itself has returned. It runs in a
    session of its own; past `timeout`, or once `stop` is set (the run ended), that session is killed (SIGKILL):
    a hung command is a failed action, never a wait without bound."""
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        except FileNotFoundError:
            return False, f"{argv[0]}: no such program"
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            ended = stop is not None and stop.is_set()
            if ended or time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                why = "the run ended before it did" if ended else f"no answer in {timeout:g} s"
                return False, f"{shlex.join(argv)}: {why}; killed"
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(0.05)
        out.seek(0)
        lines = [line for line in out.read().decode(errors="replace").splitlines() if line.strip()]
    said = lines[-1] if lines else f"exit status {proc.returncode}"
    return proc.returncode == 0, f"{shlex.join(argv)}: {said if proc.returncode else 'done'}"


def ceph_argv(backend: CephBackend, *args: str) -> list[str]:
    return ["ceph", "--conf", backend.ceph_conf, "--keyring", backend.keyring, "--id", backend.client, *args]


# --- the lab's daemons, by their PID files --------------------------------------------------------------


def service_dir(fault: AnyFault, backend: Backend) -> Path:
    """Where the daemon's service keeps client.json and its PID files: the fault's service_dir, else where the
    backend's own settings point (a Ceph backend's ceph_conf, an s3 backend's credentials file), else the lab's."""
    given = getattr(fault, "service_dir", None)
    if given:
        return Path(given)
    if isinstance(backend, CephBackend):
        return Path(backend.ceph_conf).parent
    credentials = getattr(backend, "credentials", "")
    if fault.what == "rgw_stop":
        return Path(credentials).parent if credentials.startswith("/") else Path(LAB_CEPH_DIR)
    return Path(LAB_NFS_DIR)


def daemon(fault: AnyFault, backend: Backend) -> dict[str, Any]:
    """The daemon the fault stops ({type, id, pid_file, argv} of client.json), or UserError saying why there is none."""
    where = service_dir(fault, backend)
    wanted = DAEMON_TYPES[fault.what]
    ident = str(getattr(fault, "osd", "")) if fault.what == "osd_stop" else None
    try:
        published = json.loads((where / "client.json").read_text()).get("daemons") or []
    except (OSError, ValueError) as exc:
        raise UserError(
            f"fault {fault.what}: {where}/client.json cannot be read ({exc.__class__.__name__}): the fault stops a "
            "daemon of the lab's services (./lab lab.services-up) on this controller; give the fault's service_dir"
        ) from None
    found = [d for d in published if d.get("type") == wanted and (ident is None or str(d.get("id")) == ident)]
    if not found:
        names = ", ".join(f"{d.get('type')}.{d.get('id')}" for d in published) or "none"
        raise UserError(
            f"fault {fault.what}: the services of {where} started no {wanted}{'.' + ident if ident else ''} "
            f"(theirs: {names}); run ./lab lab.services-up again to publish them, or fix the fault"
        )
    return {**found[0], "argv": [str(a) for a in found[0].get("argv", [])]}  # YAML's 0 is a number there


def running(entry: dict[str, Any]) -> int | None:
    """The PID of the daemon if its PID file names a live process with the command line it was started with."""
    try:
        pid = int(Path(entry["pid_file"]).read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return None
    return pid if [a.decode(errors="replace") for a in cmdline] == entry["argv"] and state not in "ZX" else None


def _gone(pid: int, seconds: float) -> bool:
    """The process has ended within `seconds` (a zombie its parent has not reaped yet counts: processes.alive)."""
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def stop_daemon(entry: dict[str, Any]) -> Outcome:
    name = f"{entry['type']}.{entry['id']}"
    pid = running(entry)
    if pid is None:
        return False, f"{name} does not run (no live process of its PID file {entry['pid_file']})"
    os.kill(pid, signal.SIGTERM)
    if _gone(pid, STOP_S):
        return True, f"{name} (PID {pid}) stopped by SIGTERM"
    os.kill(pid, signal.SIGKILL)
    return _gone(pid, 10), f"{name} (PID {pid}) did not stop in {STOP_S:g} s of SIGTERM; SIGKILL"


def start_daemon(entry: dict[str, Any]) -> Outcome:
    name = f"{entry['type']}.{entry['id']}"
    if (pid := running(entry)) is not None:
        return True, f"{name} runs already (PID {pid})"
    ok, said = run_argv(entry["argv"])
    if not ok:
        return False, f"{name} did not start: {said}"
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if (pid := running(entry)) is not None:
            return True, f"{name} started again (PID {pid})"
        time.sleep(0.2)
    return False, f"{name} did not start: no live process of its PID file {entry['pid_file']} after {START_S:g} s"


# --- each kind ------------------------------------------------------------------------------------------------


Action = Callable[[], Outcome | None]


def _ceph(context: Context, *args: str) -> Action:
    assert isinstance(context.backend, CephBackend)  # faults.refusal: Ceph's kinds on Ceph backends only
    return functools.partial(run_argv, ceph_argv(context.backend, *args))


def _then(first: Action, second: Action) -> Action:
    """`first`, then `second` if it went well: one record of a two-step action."""

    def both() -> Outcome | None:
        done = first()
        if not done or not done[0]:
            return done
        then = second() or (True, "")
        return then[0], f"{done[1]}; {then[1]}"

    return both


def _tool_kill(fault: HostFault, context: Context) -> Outcome:
    """`hostrun kill` of the run's tool on the fault's host (direct SSH: a command of iolab's, no campaign value)."""
    command = shlex.join([*context.host_python, "-m", "iolab.host.hostrun", "kill", "--dir"])
    reply = direct.run_one(
        fault.host,
        context.inventory.hostvars.get(fault.host, {}),
        f"{command} {shlex.quote(context.run_dirs[fault.host])}",
        CLI_S,
    )
    return reply.exit == 0, f"{fault.host}: {reply.output.splitlines()[-1] if reply.output else reply.exit}"


def actions(fault: AnyFault, context: Context, stop: threading.Event | None = None) -> tuple[Action, Action]:
    """(what injects the fault, what heals it: None from it for a kind with nothing to undo, a killed tool or a
    command without heal_argv). `stop`: set when the run ends, it kills a campaign's command still running."""
    if fault.what in DAEMON_TYPES:
        entry = functools.partial(daemon, fault, context.backend)
        return lambda: stop_daemon(entry()), lambda: start_daemon(entry())
    if isinstance(fault, OsdFault | NooutFault):
        osd = str(getattr(fault, "osd", ""))
        return {  # osd_down is held down with noup: the OSD would report itself up again within seconds
            "osd_out": (_ceph(context, "osd", "out", osd), _ceph(context, "osd", "in", osd)),
            "osd_down": (
                _then(_ceph(context, "osd", "set", "noup"), _ceph(context, "osd", "down", osd)),
                _ceph(context, "osd", "unset", "noup"),
            ),
            "noout": (_ceph(context, "osd", "set", "noout"), _ceph(context, "osd", "unset", "noout")),
        }[fault.what]
    if isinstance(fault, HostFault) and fault.what == "link_down":
        return (
            lambda: run_argv(link_argv(context.inventory, fault.host, "iolab_link_down")),
            lambda: run_argv(link_argv(context.inventory, fault.host, "iolab_link_up")),
        )
    if isinstance(fault, HostFault):
        return functools.partial(_tool_kill, fault, context), lambda: None
    assert isinstance(fault, CommandFault)
    heal_argv = fault.heal_argv
    return (
        functools.partial(run_argv, fault.argv, stop=stop),
        lambda: run_argv(heal_argv, stop=stop) if heal_argv else None,
    )


def left(fault: AnyFault) -> str:
    """What a fault whose heal failed leaves, in a few words."""
    return {
        "osd_out": f"osd.{getattr(fault, 'osd', 0)} out",
        "osd_down": "the noup flag set",
        "osd_stop": f"osd.{getattr(fault, 'osd', 0)} stopped",
        "noout": "the noout flag set",
        "nfs_stop": "nfs-ganesha stopped",
        "rgw_stop": "radosgw stopped",
        "link_down": f"{getattr(fault, 'host', '')}'s link down",
        "command": "what the command did",
    }.get(fault.what, fault.what)


# --- checked before anything starts -----------------------------------------------------------------------


def link_argv(inventory: Inventory, host: str, variable: str) -> list[str]:
    argv = inventory.hostvars.get(host, {}).get(variable)
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) and a for a in argv)):
        raise UserError(
            f"fault link_down on {host}: the inventory gives it no {variable} (an argv list run on the "
            f"controller: {' and '.join(LINK_VARS)}; lab.sim-up writes a simulated host's own)"
        )
    return argv


def preflight(fault: AnyFault, backend: Backend, inventory: Inventory, hosts: list[str]) -> None:
    """UserError, in one line, for a fault that could not be applied on this controller to a run on `hosts`: a
    cluster whose conf or keyring is not here, a daemon the lab's services do not run, a host that is not the
    run's, a link without its argv."""
    if isinstance(backend, CephBackend) and isinstance(fault, OsdFault | NooutFault):
        missing = [p for p in (backend.ceph_conf, backend.keyring) if not Path(p).is_file()]
        if missing or not shutil.which("ceph"):
            why = f"{missing[0]} is not a file here" if missing else "the ceph CLI is not installed here"
            raise UserError(
                f"fault {fault.what}: it drives backend {backend.name}'s cluster from this controller (ceph CLI, "
                f"its ceph_conf and keyring), and {why}"
            )
    if fault.what in DAEMON_TYPES:
        entry = daemon(fault, backend)
        if running(entry) is None:
            raise UserError(
                f"fault {fault.what}: {entry['type']}.{entry['id']} does not run now (its PID file "
                f"{entry['pid_file']}); start the lab's services (./lab lab.services-up) first"
            )
    if isinstance(fault, HostFault):
        if fault.host not in hosts:
            raise UserError(
                f"fault {fault.what} on {fault.host}: not a host of the run ({', '.join(hosts)}); select it with "
                "--hosts, or name one of them"
            )
        if fault.what == "link_down":
            for variable in LINK_VARS:
                link_argv(inventory, fault.host, variable)
