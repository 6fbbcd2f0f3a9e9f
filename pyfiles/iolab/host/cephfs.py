"""A CephFS backend mounted or unmounted in one call (host side; roles/storage_cephfs runs it, and the fan-out's
steps: iolab.drive.steps):

    python -m iolab.host.cephfs mounted|kept --name NAME --host HOST --mountpoint DIR --state-dir DIR
                                --conf FILE --keyring FILE --client ID --fs NAME --path PATH
                                [--method auto|kernel|fuse] [--readonly] [--option OPT ...]
                                [--check-target TARGET --root MOUNT_ROOT [--existing]]
    python -m iolab.host.cephfs unmounted|absent --name NAME --host HOST --mountpoint DIR --state-dir DIR
                                [--stop-timeout S] [--unmount-wait S] [--stop-dir RUNS_DIR [--keep-archives]]

What the role's chain of tasks and storage.yml's checks did (≈ 20 Ansible tasks and two playbooks a command: each
task ≈ 0.3 s, docs/PERFORMANCE.md), in one process, in the same words.

mounted, kept: with --check-target, first iolab.host.mounts check-target's check; then a look at the host
(iolab.host.mounts.probe: the mount point, the record of who mounted it, what the backend's state directory holds,
the kernel's ceph and fuse); root, the mount point free (or our mount there already, used as it is), the cluster's
ceph.conf and keyring on the host, the chosen client offered (auto: the kernel's where it has the ceph module, else
ceph-fuse). A host without the client's program replies {"install": "kernel"|"fuse"} and mounts nothing: the role
installs the client's packages (iolab_host's packages task, which knows each OS's names) and calls again; the
fan-out's step leaves the whole step to Ansible. Then the mount point, the state directory (with the client's bare
key for the kernel's client), ceph-fuse (its PID file in the state directory) or mount -t ceph, the record of the
mount (iolab.host.mounts), and on a read-only mount a write checked to fail. A step that fails releases everything
the mount held and refuses naming the step.

unmounted: our mount unmounted, unless it is kept; absent: whoever mounted it. The record forgotten, umount given
--unmount-wait s (then detached lazily, and reported once the rest is released), ceph-fuse stopped (SIGKILL after
--stop-timeout s), the state directory removed, and a second look: nothing of the backend may be left. With
--stop-dir, this command's tools are ended first (iolab.host.storagecall.released).

Prints {"kept": bool, "changed": bool, "stopped": [...]} (or {"install": ...}); a refusal is one line on stderr
naming the host and the fix, exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

from iolab.host import mounts
from iolab.host.storagecall import Refused, answer, check_target, parser, preflight, released, unmount

NEEDS = {"kernel": ("mount.ceph", "ceph-authtool"), "fuse": ("ceph-fuse",)}  # the client's programs
MODULE = {"kernel": "ceph", "fuse": "fuse"}  # what the kernel must offer each client
CLIENT = {"kernel": "the kernel's client", "fuse": "ceph-fuse"}
ADVICE = {
    "kernel": "the kernel of {host} ({release}) has no ceph module; load it (modprobe ceph) or set the backend's "
    "method to auto or fuse",
    "fuse": "{host} has no /dev/fuse for ceph-fuse (and its kernel no ceph module); load the fuse module",
}


def mount(opts: argparse.Namespace) -> dict[str, Any]:
    check_target(opts)
    seen = _look(opts)
    preflight(seen, seen["ours"], opts.mountpoint, opts.host, "mounting CephFS")
    missing = [path for path in (opts.conf, opts.keyring) if not os.path.exists(path)]
    if missing:
        raise Refused(
            f"{opts.host} has no {' and no '.join(missing)}; copy the cluster's ceph.conf and the client's keyring "
            "there, point the backend's ceph_conf and keyring at them, or start the lab's cluster with "
            "`invoke lab.services-up` (--bind 10.77.0.1 for simulated hosts)"
        )
    how = opts.method if opts.method != "auto" else "kernel" if seen["kernel"]["ceph"] else "fuse"
    if not seen["ours"] and not seen["kernel"][MODULE[how]]:
        raise Refused(ADVICE[how].format(host=opts.host, release=seen["kernel"]["release"]))
    if seen["ours"]:  # a file system of ours that is mounted already is used as it is
        _check_readonly(opts)
        return {"kept": seen["kept"], "changed": False}
    if not all(seen["tools"][tool] for tool in NEEDS[how]):
        return {"install": how, "kept": False, "changed": False}
    steps: list[tuple[str, Callable[[], None]]] = [
        ("Create the mount point", lambda: os.makedirs(opts.mountpoint, mode=0o755, exist_ok=True)),
        ("Create the backend's directory (with the client's key for the kernel client)", lambda: _state_dir(opts, how)),
        (f"Mount the file system with {CLIENT[how]}", lambda: _mount(opts, how)),
        ("Record who mounted the file system and with which client", lambda: _record(opts, how)),
        ("Try a write to the read-only mount, which must fail", lambda: _check_readonly(opts)),
    ]
    for step, act in steps:
        try:
            act()
        except (Refused, OSError, SystemExit) as exc:
            _release(opts, seen, force=True)
            raise Refused(
                f"mounting {opts.fs}:{opts.path} ({how}) failed at '{step}': {_said(exc)}; everything it held on "
                f"{opts.host} was released"
            ) from None
    return {"kept": opts.state == "kept", "changed": True}


def gone(opts: argparse.Namespace) -> dict[str, Any]:
    seen = _look(opts)
    changed = opts.state == "absent" or not seen["kept"]
    stopped = released(opts, lambda: _release(opts, seen) if changed else None)
    return {"kept": seen["kept"], "changed": changed and (seen["ours"] or seen["holds_anything"]), "stopped": stopped}


def _look(opts: argparse.Namespace) -> dict[str, Any]:
    tools = sorted({tool for names in NEEDS.values() for tool in names})
    return mounts.probe(opts.mountpoint, opts.state_dir, opts.name, None, ["ceph", "fuse"], tools)


def _state_dir(opts: argparse.Namespace, how: str) -> None:
    kernel = how == "kernel"
    mounts.state_dir(opts.state_dir, opts.keyring if kernel else None, f"client.{opts.client}" if kernel else None, [])


def _mount(opts: argparse.Namespace, how: str) -> None:
    readonly = ["ro"] if opts.readonly else []
    if how == "fuse":  # ceph-fuse daemonizes; its PID file (in the state directory) lets teardown find it
        argv = ["ceph-fuse", "--conf", opts.conf, "--keyring", opts.keyring, "--id", opts.client]
        argv += ["--client_fs", opts.fs, "-r", opts.path, "--pid-file", f"{opts.state_dir}/ceph-fuse.pid"]
        options = list(dict.fromkeys(readonly + opts.option))
        argv += [*(["-o", ",".join(options)] if options else []), opts.mountpoint]
    else:  # mount.ceph reads the monitors' addresses from the configuration file
        options = [f"name={opts.client}", f"secretfile={opts.state_dir}/key", f"conf={opts.conf}"]
        options += [f"mds_namespace={opts.fs}", *readonly, *opts.option]
        argv = ["mount", "-t", "ceph", f":{opts.path}", opts.mountpoint, "-o", ",".join(options)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip() and "dmesg" not in line]
        raise Refused(lines[0] if lines else f"exit {done.returncode}, no message")


def _record(opts: argparse.Namespace, how: str) -> None:
    mounts.record(
        opts.mountpoint,
        {
            "backend": opts.name,
            "type": "cephfs",
            "kept": opts.state == "kept",
            "readonly": opts.readonly,
            "method": "ceph-fuse" if how == "fuse" else "kernel",
            "fs": f"{opts.fs}:{opts.path}",
        },
    )


def _check_readonly(opts: argparse.Namespace) -> None:
    """Data safety: a read-only mount must refuse writes, whatever the options said."""
    if opts.readonly:
        refused, said = mounts.check_readonly(opts.mountpoint)
        if not refused:
            raise Refused(said)


def _release(opts: argparse.Namespace, seen: dict[str, Any], force: bool = False) -> None:
    """Take the mount away (forget its record, unmount it, lazily if need be), stop ceph-fuse, remove the state
    directory; then look again: nothing of the backend may be left, and a lazy unmount is reported."""
    lazy = ""
    if seen["ours"] or force:
        mounts.forget(opts.mountpoint)
        lazy = unmount(opts.mountpoint, opts.host, opts.unmount_wait, force)
    # ceph-fuse exits once unmounted; the stop waits for it (and kills one that hangs)
    stop = mounts.stop(opts.state_dir, opts.stop_timeout)
    if stop["left"]:
        raise Refused(f"processes {stop['left']} naming {opts.state_dir} survived SIGKILL")
    shutil.rmtree(opts.state_dir, ignore_errors=True)
    after = _look(opts)
    before = (seen["mounted"] or {}).get("source", "")
    if after["holds_anything"] or after["ours"] or (after["mounted"] and after["mounted"]["source"] == before):
        where = (after["mounted"] or {}).get("source", "none")
        raise Refused(
            f"{opts.name} left behind on {opts.host}: {json.dumps(after['held'])} (mount at {opts.mountpoint}: "
            f"{where}); release them by hand (umount, kill) and report it"
        )
    if lazy:
        raise Refused(lazy)


def _said(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return f"{exc.strerror} ({exc.filename})" if exc.filename else str(exc.strerror or exc)
    return str(exc.code if isinstance(exc, SystemExit) else exc) or "no message"


def main(argv: list[str] | None = None) -> int:
    options = parser("iolab.host.cephfs")
    options.add_argument("--mountpoint", required=True)
    options.add_argument("--state-dir", required=True, help="the backend's on this host: ceph-fuse's PID file, a key")
    options.add_argument("--conf", default="/etc/ceph/ceph.conf")
    options.add_argument("--keyring", default="/etc/ceph/ceph.client.admin.keyring")
    options.add_argument("--client", default="admin", help="the client's id (admin for client.admin)")
    options.add_argument("--fs", default="", help="the CephFS file system")
    options.add_argument("--path", default="/", help="the directory in it to mount")
    options.add_argument("--method", choices=["auto", "kernel", "fuse"], default="auto")
    options.add_argument("--readonly", action="store_true")
    options.add_argument("--option", action="append", default=[], help="a mount option (kernel: -o; ceph-fuse: FUSE)")
    options.add_argument("--stop-timeout", type=float, default=30.0, help="s ceph-fuse may take to exit")
    options.add_argument("--unmount-wait", type=float, default=20.0, help="s umount may take")
    return answer(options.parse_args(argv), mount, gone)


if __name__ == "__main__":
    raise SystemExit(main())
