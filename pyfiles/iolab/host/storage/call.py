"""What a backend's one host call shares (iolab.host.storage.tmpfs's, iolab.host.storage.localdir's,
iolab.host.storage.cephfs's): its arguments (the state, the backend's and host's names, storage.yml's check of the
target and stop of this command's tools), that check, the stop around the release of the storage, and the reply: JSON on
stdout, or a refusal's one line on stderr, exit 1. A backend that mounts a file system shares more: the preflight's root
and free mount point, the unmount that detaches lazily a mount umount cannot take away (iolab.host.storage.tmpfs's,
iolab.host.storage.cephfs's, iolab.host.storage.nfs's); and, for a client with a state directory (cephfs's, nfs's), its
arguments, the mount in named steps whose failure releases what it held, a read-only mount's write checked to fail, and
the release that stops the client and then finds nothing of it left.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iolab.host import mounts, runstop


class Refused(Exception):
    """What stops the call: one line."""


def check_target(opts: argparse.Namespace) -> None:
    """With --check-target, iolab.host.mounts.target_refusal (the directory is one iolab may use)."""
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


def mount_parser(module: str) -> argparse.ArgumentParser:
    """`parser`'s arguments, and those of a backend that mounts a file system through a client of its own."""
    options = parser(module)
    options.add_argument("--mountpoint", required=True)
    options.add_argument("--state-dir", required=True, help="the backend's on this host: its client's files")
    options.add_argument("--readonly", action="store_true", help="mounted, kept: a write is checked to fail")
    options.add_argument("--option", action="append", default=[], help="a mount option (mounted, kept)")
    options.add_argument("--stop-timeout", type=float, default=30.0, help="s the client may take to exit")
    options.add_argument("--unmount-wait", type=float, default=20.0, help="s umount may take")
    options.add_argument("--installed", action="store_true", help="the client was just installed: refuse, not ask")
    return options


def install(opts: argparse.Namespace, what: str | list[str], missing: str) -> dict[str, Any]:
    """The answer of a host that lacks what the role installs (`what`: the call's word for it; `missing`: what is
    missing, as a person says it): {"install": what}, mounting nothing; or, the role having installed it already
    (--installed), the refusal that it is still missing."""
    if opts.installed:
        raise Refused(f"{opts.host} still lacks {missing} after the role installed its packages; install it by hand")
    return {"install": what, "kept": False, "changed": False}


Look = Callable[[], dict[str, Any]]  # iolab.host.mounts.probe's look at the backend on this host
Steps = list[tuple[str, Callable[[], object]]]  # a mount's steps, each named as its failure says it
Hint = Callable[[], str] | None  # a failed mount's advice, where the backend has one
Detach = Callable[[], None] | None  # what a mapping holds released before its client is stopped, where it has one


def mount_in_steps(
    opts: argparse.Namespace,
    seen: dict[str, Any],
    look: Look,
    steps: Steps,
    holds: bool,
    what: str,
    hint: Hint = None,
    detach: Detach = None,
) -> dict[str, Any]:
    """Take `steps` in turn: the reply of a mount made; where one fails, release what the mount held (`release`,
    forced) and refuse, naming what was mounted (`what`), the step and what it said, with `hint()`'s advice."""

    def failed(step: str, why: str) -> str:
        release(opts, seen, look, holds, force=True, detach=detach)
        left = "everything it held on {} was released" if holds else "nothing is left mounted on {}"
        advice = hint() if hint else ""
        return f"mounting {what} failed at '{step}': {why}{advice}; {left.format(opts.host)}"

    in_steps(steps, failed)
    return {"kept": opts.state == "kept", "changed": True}


def in_steps(steps: Steps, failed: Callable[[str, str], str]) -> None:
    """Take `steps` in turn; where one fails, refuse in the line `failed(step, what it said)` gives, which first
    releases what the steps held (a mount's, rbd_snapshot's load)."""
    for step, act in steps:
        try:
            act()
        except (Refused, OSError, SystemExit) as exc:
            raise Refused(failed(step, said(exc))) from None


def said(exc: Refused | OSError | SystemExit) -> str:
    """What a failed step said, in one line: a refusal's, an OSError's reason and file, a SystemExit's message."""
    if isinstance(exc, OSError):
        return f"{exc.strerror} ({exc.filename})" if exc.filename else str(exc.strerror or exc)
    return str(exc.code if isinstance(exc, SystemExit) else exc) or "no message"


def check_ceph_files(opts: argparse.Namespace) -> None:
    """A Ceph client's configuration and keyring on the host (--conf, --keyring: cephfs's, rbd_snapshot's)."""
    missing = [path for path in (opts.conf, opts.keyring) if not os.path.exists(path)]
    if missing:
        raise Refused(
            f"{opts.host} has no {' and no '.join(missing)}; copy the cluster's ceph.conf and the client's keyring "
            "there, point the backend's ceph_conf and keyring at them, or start the lab's cluster with "
            "`invoke lab.services-up` (--bind 10.77.0.1 for simulated hosts)"
        )


def record(opts: argparse.Namespace, kind: str, method: str, **more: Any) -> None:
    """Who mounted the file system at the mount point (iolab.host.mounts.record, which teardown and storage.mount
    read): the backend, its kind, whether it is kept and read-only, how it was mounted, and the kind's own facts."""
    fields = {"backend": opts.name, "type": kind, "kept": opts.state == "kept", "readonly": opts.readonly}
    mounts.record(opts.mountpoint, {**fields, "method": method, **more})


def check_readonly(opts: argparse.Namespace) -> None:
    """Data safety: a read-only mount must refuse writes, whatever the options said."""
    if opts.readonly:
        refused, said = mounts.check_readonly(opts.mountpoint)
        if not refused:
            raise Refused(said)


def first_line(text: str, code: int) -> str:
    """A failed mount's first line of complaint (not the kernel's 'see dmesg' hint)."""
    lines = [line for line in text.splitlines() if line.strip() and "dmesg" not in line]
    return lines[0] if lines else f"exit {code}, no message"


def release(
    opts: argparse.Namespace, seen: dict[str, Any], look: Look, holds: bool, force: bool = False, detach: Detach = None
) -> None:
    """Take the mount away (forget its record, unmount it, lazily if need be: `seen` found it ours, or `force`, a
    failed mount's), `detach` what the client's mapping holds (rbd_snapshot's loop devices and mappings), stop the
    client that names the state directory, remove the directory; then look again: nothing
    of the backend may be left (`holds`: no client, device or mount below the state directory, and not its mount;
    else: not the file system `seen` found there), and a lazy unmount is reported."""
    lazy = ""
    if seen["ours"] or force:
        mounts.forget(opts.mountpoint)
        lazy = unmount(opts.mountpoint, opts.host, opts.unmount_wait, force)
    if detach:
        detach()
    stop = mounts.stop(opts.state_dir, opts.stop_timeout)  # a FUSE client exits once unmounted; one that hangs dies
    if stop["left"]:
        raise Refused(f"processes {stop['left']} naming {opts.state_dir} survived SIGKILL")
    shutil.rmtree(opts.state_dir, ignore_errors=True)
    after = look()
    before = (seen["mounted"] or {}).get("source", "")
    where = (after["mounted"] or {}).get("source", "none")
    still = after["mounted"] is not None and after["mounted"]["source"] == before
    if holds and (after["holds_anything"] or after["ours"] or still):
        raise Refused(
            f"{opts.name} left behind on {opts.host}: {json.dumps(after['held'])} (mount at {opts.mountpoint}: "
            f"{where}); release them by hand (umount, kill) and report it"
        )
    if still:
        raise Refused(
            f"{opts.name} is still mounted at {opts.mountpoint} on {opts.host} ({where}); unmount it by hand (umount) "
            "and report it"
        )
    if lazy:
        raise Refused(lazy)


def taken_away(opts: argparse.Namespace, look: Look, holds: bool, detach: Detach = None) -> dict[str, Any]:
    """A mounting backend's unmounted / absent: our mount taken away (`release`) unless it is a kept one and the state
    is unmounted, this command's tools stopped around it (`released`); the reply."""
    seen = look()
    changed = opts.state == "absent" or not seen["kept"]
    stopped = released(opts, lambda: release(opts, seen, look, holds, detach=detach) if changed else None)
    return {"kept": seen["kept"], "changed": changed and (seen["ours"] or seen["holds_anything"]), "stopped": stopped}


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def parser(module: str) -> argparse.ArgumentParser:
    """The arguments a backend's one call takes (iolab.host.storage.tmpfs's, iolab.host.storage.localdir's): its state,
    the backend's name, the host's, the storage.yml's check of the target and stop of this command's tools."""
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


def answer_mounting(
    opts: argparse.Namespace,
    mount: Callable[[argparse.Namespace], dict],
    look: Callable,
    holds: bool,
    detach: Callable[[argparse.Namespace], None] | None = None,
) -> int:
    """The reply of a backend that mounts a client (cephfs, nfs, a generic mount, rbd_snapshot): `mount(opts)` for
    mounted and kept, `taken_away` with its `look(opts)` for unmounted and absent (`holds`, `detach`: as
    `release`'s)."""
    return answer(
        opts,
        mount,
        lambda opts: taken_away(opts, lambda: look(opts), holds, (lambda: detach(opts)) if detach else None),
    )
