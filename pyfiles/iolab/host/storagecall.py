"""What a backend's one host call shares (iolab.host.tmpfs's, iolab.host.localdir's, iolab.host.cephfs's): its
arguments (the state, the backend's and host's names, storage.yml's check of the target and stop of this command's
tools), that check, the stop around the release of the storage, and the reply: JSON on stdout, or a refusal's one
line on stderr, exit 1. A backend that mounts a file system shares more (iolab.host.tmpfs's, iolab.host.cephfs's):
the preflight's root and free mount point, and the unmount that detaches lazily a mount umount cannot take away.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from iolab.host import mounts, runstop


class Refused(Exception):
    """What stops the call: one line."""


def check_target(opts: argparse.Namespace) -> None:
    """With --check-target, iolab.host.mounts check-target's refusal (the directory is one iolab may use)."""
    if opts.check_target is not None:
        reason, _ = mounts.target_refusal(opts.check_target, opts.root, opts.existing)
        if reason:
            raise Refused(reason)


def released(opts: argparse.Namespace, release: Callable[[], object]) -> list[str]:
    """`release` the storage (unmount it, remove iolab's files) between this command's tools ended and its run files
    removed (--stop-dir: iolab.host.runstop) and, where a tool was left, again after it: a tool that held the storage
    ends once it is gone, and must be gone now. Returns what the stops did."""
    stopped, left = _stop(opts)
    release()
    if left:
        again, left = _stop(opts)
        stopped += again
        if left:
            raise Refused(left)
    return stopped


def _stop(opts: argparse.Namespace) -> tuple[list[str], str]:
    """This command's tools ended and its run files removed (iolab.host.runstop): what it did, and what it found
    still running (its own line), or ''."""
    if opts.stop_dir is None:
        return [], ""
    said, complaint = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(complaint):
        rc = runstop.stop(Path(opts.stop_dir), keep_archives=opts.keep_archives)
    return said.getvalue().splitlines(), (last_line(complaint.getvalue()) if rc else "")


def preflight(seen: dict, ours: bool, mountpoint: str, host: str, needs: str) -> None:
    """What every mount needs (`seen`: iolab.host.facts.probe's or iolab.host.mounts.probe's look at the mount
    point): root (`needs`: what needs it, as the refusal says), and the mount point free, or `ours` already there."""
    if seen["uid"] != 0:
        raise Refused(f"{needs} needs root on {host}; connect as root or set ansible_become true")
    if not ours and seen["mounted"] is not None:
        raise Refused(
            f"{mountpoint} already has another file system ({seen['mounted'].get('source', '')}) mounted on {host}; "
            "unmount it or give the backend another mountpoint"
        )


def unmount(mountpoint: str, host: str, wait: float, force: bool = False) -> str:
    """umount `mountpoint`, given `wait` s (storage gone away can keep it waiting for ever, a tool blocked on it keep
    it busy), else detach it lazily so that the rest of a teardown runs: '' when it was unmounted (or, `force`: a
    teardown after a failed mount, found not mounted), else the line that reports the lazy unmount, which the caller
    raises once the rest is released."""
    argv = ["timeout", "-k", "5", f"{wait:g}", "umount", mountpoint]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode == 0 or (force and "not mounted" in done.stderr):
        return ""
    subprocess.run(["umount", "-l", mountpoint], capture_output=True, check=False)
    why = f"no answer in {wait:g} s: its storage gone away?" if done.returncode in (124, 137) else done.stderr.strip()
    return (
        f"umount {mountpoint} on {host} failed ({why}); detached lazily (umount -l): the kernel frees it once "
        "nothing uses it"
    )


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def parser(module: str) -> argparse.ArgumentParser:
    """The arguments a backend's one call takes (iolab.host.tmpfs's, iolab.host.localdir's): its state, the backend's
    name, the host's, the storage.yml's check of the target and stop of this command's tools."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("state", choices=["mounted", "kept", "unmounted", "absent"])
    parser.add_argument("--name", required=True)
    parser.add_argument("--host", required=True, help="the inventory name, as refusals say it")
    parser.add_argument("--check-target", help="check first that this directory is one iolab may mount on")
    parser.add_argument("--root", default="", help="with --check-target: iolab's mount root")
    parser.add_argument("--existing", action="store_true", help="with --check-target: the directory is an existing one")
    parser.add_argument("--stop-dir", help="unmounted, absent: first end this command's tools, as hostrun stop")
    parser.add_argument("--keep-archives", action="store_true", help="with --stop-dir: as hostrun stop's")
    return parser


def answer(opts: argparse.Namespace, ready: Callable[[argparse.Namespace], dict], gone: Callable) -> int:
    """The call's reply: `ready(opts)` (mounted, kept) or `gone(opts)` (unmounted, absent) as JSON on stdout, or its
    refusal's one line on stderr, exit 1."""
    try:
        done = ready(opts) if opts.state in ("mounted", "kept") else gone(opts)
    except Refused as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps(done))
    return 0
