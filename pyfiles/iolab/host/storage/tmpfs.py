"""A backend's tmpfs put in place or taken away in one call (host side; roles/storage_tmpfs runs it):

    python -m iolab.host.storage.tmpfs mounted|kept --name NAME --size BYTES --mountpoint DIR --host HOST
                                       [--check-target TARGET --root MOUNT_ROOT [--existing]]
    python -m iolab.host.storage.tmpfs unmounted|absent --name NAME --mountpoint DIR --host HOST
                                       [--stop-dir RUNS_DIR [--keep-archives]]

One process instead of a chain of Ansible tasks (each ≈ 0.3 s; docs/PERFORMANCE.md). The mount's source says
who mounted it: iolab:NAME (a campaign), iolab:NAME:kept (`storage.mount`, which campaigns leave alone).

mounted, kept: with --check-target, first the check of iolab.host.mounts.target_refusal (the backend's directory is
one iolab may mount on: playbooks/storage.yml leaves it to this call); then, as the role's preflight did: root, the
mount point free (or our tmpfs there already, used as it is), the size below the host's memory; then the mount
point made and the tmpfs mounted. unmounted: our tmpfs unmounted, unless it is kept; absent: unmounted whoever
mounted it. With --stop-dir, first what storage.yml's `hostrun stop` did (iolab.host.runstop: this command's tools
ended, its run files removed; it leaves that to this call), and, where a tool was left, again after the unmount,
which fails naming it. A tool stopped a moment ago may still hold the file system: umount is tried for up to 10 s.
Prints {"kept": bool, "changed": bool, "stopped": [what the stop did]}; a refusal is one line on stderr naming the
host and the fix, exit 1. What it shares with iolab.host.storage.localdir's call is iolab.host.storage.call's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from typing import Any

from iolab.host import facts
from iolab.host.storage.call import Refused, answer, check_target, last_line, parser, preflight, released

UMOUNT_TRIES = 10  # 1 s apart


def mount(opts: argparse.Namespace) -> dict[str, Any]:
    check_target(opts)
    seen, ours, kept = _look(opts)
    preflight(seen, ours, opts.mountpoint, opts.host, "mounting a tmpfs (mount(2) is privileged)")
    if opts.size >= seen["memory_bytes"]:
        raise Refused(
            f"tmpfs size {round(opts.size / 1048576)} MiB does not fit in the {round(seen['memory_bytes'] / 1048576)}"
            f" MiB of memory of {opts.host} (a tmpfs lives in RAM); lower the backend's size"
        )
    if ours:  # a tmpfs of ours that is already mounted is used as it is
        return {"kept": kept, "changed": False}
    os.makedirs(opts.mountpoint, mode=0o755, exist_ok=True)
    source = f"iolab:{opts.name}" + (":kept" if opts.state == "kept" else "")
    argv = ["mount", "-t", "tmpfs", "-o", f"size={opts.size},mode=0755", source, opts.mountpoint]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise Refused(f"mount of the tmpfs at {opts.mountpoint} on {opts.host} failed: {last_line(done.stderr)}")
    return {"kept": opts.state == "kept", "changed": True}


def unmount(opts: argparse.Namespace) -> dict[str, Any]:
    """The empty mount point stays: on simulated hosts (one shared root file system) removing it would detach the
    same mount point in every other host's namespace."""
    _, ours, kept = _look(opts)
    changed = ours and not (kept and opts.state != "absent")
    stopped = released(opts, lambda: _umount(opts) if changed else None)
    return {"kept": kept, "changed": changed, "stopped": stopped}


def _umount(opts: argparse.Namespace) -> None:
    for attempt in range(UMOUNT_TRIES):
        done = subprocess.run(["umount", opts.mountpoint], capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return
        if attempt < UMOUNT_TRIES - 1:
            time.sleep(1)
    raise Refused(f"umount {opts.mountpoint} on {opts.host} failed {UMOUNT_TRIES} times: {last_line(done.stderr)}")


def _look(opts: argparse.Namespace) -> tuple[dict[str, Any], bool, bool]:
    """The host (iolab.host.facts.probe), whether our tmpfs is mounted there, and whether it is a kept one."""
    seen = facts.probe(opts.mountpoint)
    source = (seen["mounted"] or {}).get("source", "")
    ours = f"iolab:{opts.name}"
    return seen, source in (ours, f"{ours}:kept"), source == f"{ours}:kept"


def main(argv: list[str] | None = None) -> int:
    options = parser("iolab.host.storage.tmpfs")
    options.add_argument("--mountpoint", required=True)
    options.add_argument("--size", type=int, default=0, help="bytes (mounted, kept)")
    return answer(options.parse_args(argv), mount, unmount)


if __name__ == "__main__":
    raise SystemExit(main())
