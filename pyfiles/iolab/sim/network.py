"""A simulated lab's network (iolab.sim): its subnet, from the registry of the labs up on this machine; its
bridge; each host's network namespace, veth pair and /etc/netns files; and removing them again."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from pathlib import Path

from iolab.errors import UserError
from iolab.sim.lab import ADDRESS_BLOCK, GROUP, Lab, SimHost, controller_address, run

PREFIX_LENGTH = 24
MAX_LABS = 255  # subnets 10.77.0 .. 10.77.254
# In /run, as the namespaces are: a reboot clears both together.
REGISTRY = Path("/run/iolab-sim/labs.json")


def registry() -> dict[str, dict]:
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


def bridge_up(lab: Lab, tools: dict[str, str]) -> bool:
    return lab.bridge in links(tools)


def register(lab: Lab, tools: dict[str, str]) -> int:
    """The lab's subnet: its own if registered, else the lowest that no lab and no interface uses."""
    labs_up = registry()
    entry = labs_up.get(lab.name)
    if entry and entry["dir"] != str(lab.dir):
        if bridge_up(lab, tools) or namespaces(lab):
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


def unregister(lab: Lab) -> None:
    labs_up = registry()
    if labs_up.pop(lab.name, None) is not None:
        _write_registry(labs_up)


def _subnets_in_use(tools: dict[str, str]) -> set[int]:
    """Third octets of the 10.77.x.y addresses on this machine's interfaces (another lab, anything)."""
    proc = run([tools["ip"], "-j", "-4", "addr", "show"], check=False)
    found = set()
    for link in json.loads(proc.stdout or "[]") if proc.returncode == 0 else []:
        for addr in link.get("addr_info", []):
            parts = addr.get("local", "").split(".")
            if ".".join(parts[:2]) == ADDRESS_BLOCK and len(parts) == 4:
                found.add(int(parts[2]))
    return found


def _numbered(lab: Lab, directory: Path) -> dict[str, int]:
    """The entries of `directory` named for the lab's hosts' namespaces, each with its host number."""
    if not directory.is_dir():
        return {}
    pattern = re.compile(rf"^{re.escape(lab.namespace_prefix)}{GROUP}(\d\d)$")
    return {p.name: int(m[1]) for p in sorted(directory.iterdir()) if (m := pattern.match(p.name))}


def namespaces(lab: Lab) -> dict[str, int]:
    """The lab's namespaces up on this machine, each with its host number."""
    return _numbered(lab, Path("/run/netns"))  # where `ip netns add` pins namespaces


def netns_etc_hosts(lab: Lab) -> set[int]:
    """The numbers of the lab's hosts that have files in /etc/netns."""
    return set(_numbered(lab, Path("/etc/netns")).values())


def links(tools: dict[str, str], namespace: str | None = None) -> list[str]:
    argv = [tools["ip"], "-j"] + (["-n", namespace] if namespace else []) + ["link", "show"]
    proc = run(argv, check=False)
    if proc.returncode != 0:
        return []
    return [link["ifname"] for link in json.loads(proc.stdout or "[]")]


def lab_links(lab: Lab, tools: dict[str, str]) -> list[str]:
    """The lab's bridge and veths on this machine."""
    return [link for link in links(tools) if link == lab.bridge or link.startswith(f"v{lab.name}-")]


def netns_etc(host: SimHost) -> Path:
    return Path("/etc/netns") / host.namespace


def ensure_bridge(lab: Lab, subnet: int, tools: dict[str, str]) -> None:
    ip = tools["ip"]
    if lab.bridge not in links(tools):
        run([ip, "link", "add", "name", lab.bridge, "type", "bridge"])
    run([ip, "addr", "replace", f"{controller_address(subnet)}/{PREFIX_LENGTH}", "dev", lab.bridge])
    run([ip, "link", "set", "dev", lab.bridge, "up"])


def ensure_network(lab: Lab, host: SimHost, tools: dict[str, str]) -> None:
    ip, ns = tools["ip"], host.namespace
    if ns not in namespaces(lab):
        run([ip, "netns", "add", ns])
    if host.veth not in links(tools):
        # A namespace left without its veth may still hold the old peer's name.
        run([ip, "-n", ns, "link", "del", "dev", "eth0"], check=False)
        run([ip, "link", "add", "name", host.veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run([ip, "link", "set", "dev", host.veth, "master", lab.bridge, "up"])
    run([ip, "-n", ns, "addr", "replace", f"{host.address}/{PREFIX_LENGTH}", "dev", "eth0"])
    run([ip, "-n", ns, "link", "set", "dev", "eth0", "up"])
    run([ip, "-n", ns, "link", "set", "dev", "lo", "up"])


def write_netns_etc(host: SimHost, hosts: list[SimHost], controller: str) -> None:
    """/etc/hosts and /etc/resolv.conf as the host's processes see them.

    Without them every name lookup in a namespace waits 10 s on the controller's
    unreachable resolver. `ip netns exec` bind-mounts these files, so
    they are rewritten in place: a new inode would not reach an sshd already running.
    """
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", f"{controller}\tcontroller"]
    lines += [f"{h.address}\t{h.name}" for h in hosts]
    etc = netns_etc(host)
    etc.mkdir(parents=True, exist_ok=True)
    for name, text in (("hosts", "\n".join(lines) + "\n"), ("resolv.conf", "nameserver 127.0.0.1\n")):
        path = etc / name
        if not path.exists() or path.read_text() != text:
            with open(path, "w") as handle:
                handle.write(text)


def remove(
    lab: Lab, hosts: list[SimHost], found_namespaces: dict[str, int], found_links: list[str], tools: dict[str, str]
) -> None:
    """Delete the lab's network as `down` found it (its veths, its hosts' namespaces and /etc/netns files, its
    bridge) once the hosts' processes have ended; refuse, naming them, when links or namespaces are left."""
    # Deleting the veth from the bridge side removes both ends at once; leaving it
    # to the namespace's (asynchronous) cleanup races a quick sim-up that follows.
    for link in found_links:
        if link != lab.bridge:
            run([tools["ip"], "link", "del", "dev", link], check=False)
    for host in hosts:
        if host.namespace in found_namespaces:
            run([tools["ip"], "netns", "del", host.namespace], check=False)
        shutil.rmtree(netns_etc(host), ignore_errors=True)
    with contextlib.suppress(OSError):
        Path("/etc/netns").rmdir()  # only if empty
    if lab.bridge in found_links:
        run([tools["ip"], "link", "del", "dev", lab.bridge], check=False)
    leftovers = lab_links(lab, tools) + list(namespaces(lab))
    if leftovers:
        raise UserError(f"lab.sim-down could not remove {', '.join(leftovers)}; see `ip link` / `ip netns`")
