"""Direct SSH to the lab's hosts (Fabric), for latency-bound work: `lab.ping`, `lab.exec`.

Ansible is the fan-out engine for everything that changes a host; this is the
quick look: one command on every selected host in parallel, a row per host.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from concurrent.futures import ThreadPoolExecutor

from iolab.campaign.hosts import Inventory
from iolab.errors import UserError


@dataclasses.dataclass(frozen=True)
class Reply:
    host: str
    exit: int | None  # None: the host could not be reached
    output: str
    seconds: float


def connection(host: str, hostvars: dict, timeout: float = 10):
    """A Fabric connection to `host` as the inventory describes it (not opened yet)."""
    from fabric import Connection

    key = hostvars.get("ansible_ssh_private_key_file")
    return Connection(
        host=hostvars.get("ansible_host", host),
        user=hostvars.get("ansible_user"),
        port=int(hostvars.get("ansible_port", 22)),
        connect_timeout=timeout,
        connect_kwargs={"key_filename": [key]} if key else {},
    )


def run_one(host: str, hostvars: dict, command: str, timeout: float) -> Reply:
    from invoke import Context

    started = time.monotonic()
    try:
        if hostvars.get("ansible_connection") == "local":
            result = Context().run(command, hide=True, warn=True, timeout=timeout, in_stream=False)
        else:
            with connection(host, hostvars) as conn:
                result = conn.run(command, hide=True, warn=True, timeout=timeout, in_stream=False)
        assert result is not None, "run(warn=True) returns a result"
        output = (result.stdout + result.stderr).strip()
        return Reply(host, result.exited, output, time.monotonic() - started)
    except Exception as exc:  # noqa: BLE001 — any failure to reach a host is that host's row, not a crash
        return Reply(host, None, f"{type(exc).__name__}: {exc}".strip(), time.monotonic() - started)


def run_all(inventory: Inventory, hosts: list[str], command: str, timeout: float = 60) -> list[Reply]:
    """`command` (run by each host's shell: it is the user's own) on every host at once."""
    with ThreadPoolExecutor(max_workers=min(32, len(hosts))) as pool:
        futures = [pool.submit(run_one, h, inventory.hostvars.get(h, {}), command, timeout) for h in hosts]
        return [f.result() for f in futures]


def ping(inventory: Inventory, hosts: list[str]) -> list[Reply]:
    """Reach every host and ask its name and kernel: a round trip per host, timed."""
    return run_all(inventory, hosts, shlex.join(["uname", "-nr"]), timeout=15)


def memory(inventory: Inventory, hosts: list[str]) -> list[int | None]:
    """Each host's RAM in bytes (MemTotal of /proc/meminfo), for `dataset: {files: auto}` and MLPerf's size rule;
    UserError naming a host whose RAM cannot be read."""
    out: list[int | None] = []
    for reply in run_all(inventory, hosts, "grep MemTotal /proc/meminfo"):
        fields = reply.output.split()
        if reply.exit != 0 or len(fields) < 2 or not fields[1].isdigit():
            raise UserError(f"cannot read {reply.host}'s RAM for the data set's size ({reply.output[:200]!r})")
        out.append(int(fields[1]) * 1024)
    return out
