"""How the fan-out reaches its hosts (iolab.drive.fanout): one ssh_config block per host from the inventory, the ssh
options Ansible uses, a ClusterShell topology (its gateways), and the bound on the wait for a host not ready.

    ssh_config(inventory, hosts) → the ssh_config text       ssh_options(inventory, hosts, config) → ClusterShell's
    topology(inventory, hosts) → (file, gateways) or None      ready_wait(inventory, hosts) → s
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import socket
from pathlib import Path

from ClusterShell.Topology import TopologyError, TopologyParser

from iolab import paths
from iolab.campaign.hosts import Inventory
from iolab.errors import UserError
from iolab.units import parse_duration

# A host not ready when every other host has been ready this long is not coming: the run starts without it. The
# bound is the longer of READY_WAIT and the slowest ready host's own time to get ready: every host does the same
# prepare (size, lay out, drop caches) on the same kind of storage, so one taking more than twice as long as the
# slowest of the others is stuck (or measures another machine), and 30 s keeps a short prepare's noise out. The
# inventory variable `iolab_ready_wait` (a duration, one for every selected host) sets it for a lab: longer where
# the hosts' prepares differ more (storage shared unevenly), shorter where a lost host should cost less.
READY_WAIT = 30.0
# Inventory variables the ssh_config says as Ansible does (and their aliases).
_SSH_VARS = {
    "ansible_host": "HostName",
    "ansible_ssh_host": "HostName",
    "ansible_user": "User",
    "ansible_ssh_user": "User",
    "ansible_port": "Port",
    "ansible_ssh_port": "Port",
    "ansible_ssh_private_key_file": "IdentityFile",
    "ansible_private_key_file": "IdentityFile",
    "ansible_timeout": "ConnectTimeout",
    "ansible_ssh_timeout": "ConnectTimeout",
}

_PYTHON = re.compile(r"[\w./+-]+")  # a gateway's python: a program's path or name, never a shell command


def topology(inventory: Inventory, hosts: list[str]) -> tuple[str, list[str]] | None:
    """The selected hosts' ClusterShell topology file and its gateways, checked; None without one. UserError, in one
    line naming the file and the fix, for what would fail once runs start: a file that cannot be read, is not a
    topology or has a loop, a root that is not this controller's short name, a selected host no route reaches, a
    gateway that is not a host of the inventory (its ssh settings come from there), hosts that name different
    files, a gateway python that is not a program (ClusterShell runs it through the gateway's shell)."""
    files = {str(inventory.hostvars.get(h, {}).get("iolab_topology", "")) for h in hosts}
    if files == {""}:
        return None
    if len(files) > 1:
        raise UserError(
            f"the hosts name different topologies ({', '.join(sorted(files))}): name one, in the group's vars"
        )
    (path,) = files
    root = socket.gethostname().split(".")[0]
    where = f"iolab_topology {path}"
    if not Path(path).is_file():
        raise UserError(f"{where}: no such file; give the path of a ClusterShell topology file (its root: {root})")
    try:
        groups = list(TopologyParser(path).tree(root))
    except (TopologyError, configparser.Error, OSError, ValueError) as exc:
        raise UserError(f"{where}: not a usable topology for this controller ({root}): {exc}") from None
    gateways = [str(n) for g in groups if g.parent is not None and g.children_len() > 0 for n in g.nodeset]
    routed = {str(n) for g in groups if g.parent is not None for n in g.nodeset}
    if unrouted := [h for h in hosts if h not in routed]:
        raise UserError(f"{where}: no route from {root} reaches {', '.join(unrouted)}; add them under a gateway")
    if strangers := [g for g in gateways if g not in inventory.hostvars]:
        raise UserError(
            f"{where}: gateway {strangers[0]} is not a host of the inventory, which says how to reach it over ssh; "
            "add it (it need not be selected)"
        )
    python = str(inventory.hostvars.get(hosts[0], {}).get("iolab_gateway_python", "python3"))
    if not _PYTHON.fullmatch(python):
        raise UserError(f"iolab_gateway_python {python!r} is not a program's path or name (one word, no shell syntax)")
    return path, gateways


def ready_wait(inventory: Inventory, hosts: list[str]) -> float:
    """The selected hosts' bound on the wait for a host not ready (READY_WAIT unless the inventory variable
    `iolab_ready_wait` says), checked; UserError, in one line naming the variable, for a value that is not a
    positive duration (30s, 2m or a number of seconds) or hosts that give different ones."""
    values = {str(inventory.hostvars.get(h, {}).get("iolab_ready_wait", "")) for h in hosts}
    if values == {""}:
        return READY_WAIT
    if len(values) > 1:
        shown = ", ".join(v or "(none)" for v in sorted(values))
        raise UserError(f"the hosts give different iolab_ready_wait ({shown}): give one, in the group's vars")
    (value,) = values
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise UserError(f"iolab_ready_wait {value!r}: {exc}; give a duration such as 30s") from None


def ssh_config(inventory: Inventory, hosts: list[str]) -> str:
    """One ssh_config block per host: its address, user, port, key and connect timeout as the inventory gives them
    (ansible.cfg's timeout where it gives none); the user's own ssh config is read after them."""
    defaults = configparser.ConfigParser(interpolation=None)
    defaults.read(paths.ANSIBLE_CFG)
    lines = []
    for host in hosts:
        values = {"ConnectTimeout": defaults.get("defaults", "timeout", fallback="10")}
        values.update({_SSH_VARS[k]: str(v) for k, v in inventory.hostvars.get(host, {}).items() if k in _SSH_VARS})
        lines.append(f"Host {host}")
        lines += [f"  {key} {json.dumps(value)}" for key, value in values.items()]
    lines += ["Match all", "  Include config"]  # ~/.ssh/config, for what the inventory leaves to it
    return "\n".join(lines) + "\n"


def ssh_options(inventory: Inventory, hosts: list[str], config: Path) -> str:
    """ClusterShell's ssh_options: ansible.cfg's ssh_args, the inventory's common arguments, then the ssh_config."""
    defaults = configparser.ConfigParser(interpolation=None)
    defaults.read(paths.ANSIBLE_CFG)
    common = str(inventory.hostvars.get(hosts[0], {}).get("ansible_ssh_common_args", ""))
    argv = [*shlex.split(common), *shlex.split(defaults.get("ssh_connection", "ssh_args", fallback=""))]
    return shlex.join([*argv, "-T", "-o", "LogLevel=ERROR", "-F", str(config)])
