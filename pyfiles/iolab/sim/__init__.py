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

The package: iolab.sim.lab (what a lab is: names, addresses, files; checks, lock, commands),
iolab.sim.network (subnet registry, bridge, namespaces, veths, /etc/netns) and iolab.sim.sshd
(keys, each host's sshd, the inventory; ending a host's processes); this module puts them together.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from iolab.errors import UserError
from iolab.sim.lab import (
    HOST_RE,
    MAX_HOSTS,
    HostStatus,
    Lab,
    SimHost,
    checked_lab_dir,
    control_dir,
    controller_address,
    find_tools,
    for_checkout,
    lock,
    private_key,
    require_root,
    ssh_common_args,
)
from iolab.sim.network import (
    bridge_up,
    ensure_bridge,
    ensure_network,
    lab_links,
    namespaces,
    netns_etc_hosts,
    register,
    registry,
    remove,
    unregister,
    write_netns_etc,
)
from iolab.sim.sshd import (
    close_control_masters,
    end_host_processes,
    ensure_keys,
    ensure_sshd,
    running_sshd,
    wait_for_pid_files,
    wait_for_ssh,
    write_inventory,
)

__all__ = [
    "HostStatus",
    "Lab",
    "SimHost",
    "control_dir",
    "controller_address",
    "down",
    "for_checkout",
    "kill",
    "labs",
    "private_key",
    "ssh_common_args",
    "status",
    "subnet_of",
    "up",
]


def up(count: int, lab: Lab, *, timeout: float = 20.0) -> list[SimHost]:
    """Bring up the lab's gpu01..gpu<count> and write its inventory; return them.

    Idempotent: hosts already up are only verified; a larger count adds the missing
    ones (and tells the running ones the new names). A smaller count is refused, and
    so is a lab name another lab directory has up.
    """
    if not 1 <= count <= MAX_HOSTS:
        raise UserError(f"--count must be between 1 and {MAX_HOSTS} (host names are gpu01..gpu99), not {count}")
    lab = dataclasses.replace(lab, dir=checked_lab_dir(lab.dir))
    require_root("lab.sim-up")
    tools = find_tools()
    with lock():
        subnet = register(lab, tools)
        hosts = [lab.host(n, subnet) for n in range(1, count + 1)]
        extra = sorted(ns for ns, number in namespaces(lab).items() if number > count)
        if extra:
            raise UserError(
                f"simulated hosts beyond --count {count} are up in lab {lab.name} ({', '.join(extra)}); "
                "run lab.sim-down first to shrink the lab"
            )
        key = ensure_keys(lab.dir, tools)
        control_dir(lab.dir).mkdir(mode=0o700, parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        ensure_bridge(lab, subnet, tools)
        for host in hosts:
            ensure_network(lab, host, tools)
        for host in hosts:
            write_netns_etc(host, hosts, controller_address(subnet))
        for host in hosts:
            ensure_sshd(host, lab.dir, tools)
        wait_for_pid_files(hosts, lab.dir, timeout)
        wait_for_ssh(hosts, lab.dir, key, tools, timeout)
        write_inventory(lab.inventory, hosts, lab.dir)
    return hosts


def down(lab: Lab) -> bool:
    """Remove everything `up` made for this lab, and nothing of another; False if it was not up."""
    lab_dir = Path(lab.dir).absolute()
    require_root("lab.sim-down")
    tools = find_tools(required=("ip", "ssh"))
    with lock():
        entry = registry().get(lab.name)
        if entry and entry["dir"] != str(lab_dir) and bridge_up(lab, tools):
            raise UserError(
                f"lab {lab.name} was brought up from {entry['dir']}, not {lab_dir}; take it down from there"
            )
        found = namespaces(lab)
        numbers = set(found.values()) | netns_etc_hosts(lab) | _host_numbers(lab_dir)
        links = lab_links(lab, tools)
        if not (entry or numbers or links or lab.inventory.exists()):
            return False
        close_control_masters(control_dir(lab_dir), tools)
        hosts = [lab.host(n, entry["subnet"] if entry else 0) for n in sorted(numbers)]
        end_host_processes(hosts, lab_dir, tools)
        remove(lab, hosts, found, links, tools)
        unregister(lab)
        Path(lab.inventory).unlink(missing_ok=True)
        for sub in ("hosts", "cp", "ssh"):
            shutil.rmtree(lab_dir / sub, ignore_errors=True)
    return True


def labs() -> dict[str, dict]:
    """The labs up on this machine, whichever checkout made them: name -> subnet, dir, since."""
    return registry()


def subnet_of(lab: Lab) -> int | None:
    """The lab's subnet S (10.77.S.0/24) while it is up, else None."""
    entry = registry().get(lab.name)
    return entry["subnet"] if entry else None


def kill(lab: Lab, name: str) -> None:
    """Simulate a host failure: end its sshd and every process in it; its mounts go with them.

    `up` brings it back (a fresh sshd, an empty mount namespace).
    """
    require_root("simulating a host failure")
    match = HOST_RE.match(name)
    if not match:
        raise UserError(f"{name!r} is not a simulated host name (gpu01 … gpu{MAX_HOSTS})")
    end_host_processes([lab.host(int(match.group(1)), subnet_of(lab) or 0)], Path(lab.dir).absolute(), find_tools())


def status(lab: Lab) -> list[HostStatus]:
    """The hosts `up` made in this lab, each with its sshd's PID if it runs."""
    lab_dir = Path(lab.dir).absolute()
    numbers = sorted(_host_numbers(lab_dir))
    subnet = subnet_of(lab) or 0
    return [HostStatus(host, running_sshd(lab_dir, host)) for host in (lab.host(n, subnet) for n in numbers)]


def _host_numbers(lab_dir: Path) -> set[int]:
    """The numbers of the hosts `up` made files for in the lab's directory."""
    hosts_dir = lab_dir / "hosts"
    if not hosts_dir.is_dir():
        return set()
    return {int(m[1]) for p in hosts_dir.iterdir() if (m := HOST_RE.match(p.name))}
