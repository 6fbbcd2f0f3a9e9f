"""A CephFS backend mounted or unmounted in one call (host side; roles/storage_cephfs runs it, and the fan-out's
steps: iolab.drive.steps):

    python -m iolab.host.storage.cephfs mounted|kept --name NAME --host HOST --mountpoint DIR --state-dir DIR
                                        --conf FILE --keyring FILE --client ID --fs NAME --path PATH
                                        [--method auto|kernel|fuse] [--readonly] [--option OPT ...]
                                        [--check-target TARGET --root MOUNT_ROOT [--existing]]
    python -m iolab.host.storage.cephfs unmounted|absent --name NAME --host HOST --mountpoint DIR --state-dir DIR
                                        [--stop-timeout S] [--unmount-wait S] [--stop-dir RUNS_DIR [--keep-archives]]

What the role's chain of tasks and storage.yml's checks did (≈ 20 Ansible tasks and two playbooks a command: each
task ≈ 0.3 s, docs/PERFORMANCE.md), in one process, in the same words.

mounted, kept: with --check-target, first iolab.host.mounts.target_refusal's check; then a look at the host
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
--stop-dir, this command's tools are ended first (iolab.host.storage.call.released).

Prints {"kept": bool, "changed": bool, "stopped": [...]} (or {"install": ...}); a refusal is one line on stderr
naming the host and the fix, exit 1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from typing import Any

from iolab.host import mounts
from iolab.host.storage import call

NEEDS = {"kernel": ("mount.ceph", "ceph-authtool"), "fuse": ("ceph-fuse",)}  # the client's programs
MODULE = {"kernel": "ceph", "fuse": "fuse"}  # what the kernel must offer each client
CLIENT = {"kernel": "the kernel's client", "fuse": "ceph-fuse"}
ADVICE = {
    "kernel": "the kernel of {host} ({release}) has no ceph module; load it (modprobe ceph) or set the backend's "
    "method to auto or fuse",
    "fuse": "{host} has no /dev/fuse for ceph-fuse (and its kernel no ceph module); load the fuse module",
}


def mount(opts: argparse.Namespace) -> dict[str, Any]:
    call.check_target(opts)
    seen = _look(opts)
    call.preflight(seen, seen["ours"], opts.mountpoint, opts.host, "mounting CephFS")
    call.check_ceph_files(opts)
    how = opts.method if opts.method != "auto" else "kernel" if seen["kernel"]["ceph"] else "fuse"
    if not seen["ours"] and not seen["kernel"][MODULE[how]]:
        raise call.Refused(ADVICE[how].format(host=opts.host, release=seen["kernel"]["release"]))
    if seen["ours"]:  # a file system of ours that is mounted already is used as it is
        call.check_readonly(opts)
        return {"kept": seen["kept"], "changed": False}
    if missing := [tool for tool in NEEDS[how] if not seen["tools"][tool]]:
        return call.install(opts, how, " and ".join(missing))
    steps: call.Steps = [
        ("Create the mount point", lambda: os.makedirs(opts.mountpoint, mode=0o755, exist_ok=True)),
        ("Create the backend's directory (with the client's key for the kernel client)", lambda: _state_dir(opts, how)),
        (f"Mount the file system with {CLIENT[how]}", lambda: _mount(opts, how)),
        ("Record who mounted the file system and with which client", lambda: _record(opts, how)),
        ("Try a write to the read-only mount, which must fail", lambda: call.check_readonly(opts)),
    ]
    return call.mount_in_steps(opts, seen, lambda: _look(opts), steps, True, f"{opts.fs}:{opts.path} ({how})")


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
        raise call.Refused(call.first_line(done.stderr, done.returncode))


def _record(opts: argparse.Namespace, how: str) -> None:
    call.record(opts, "cephfs", "ceph-fuse" if how == "fuse" else "kernel", fs=f"{opts.fs}:{opts.path}")


def main(argv: list[str] | None = None) -> int:
    options = call.mount_parser("iolab.host.storage.cephfs")
    options.add_argument("--conf", default="/etc/ceph/ceph.conf")
    options.add_argument("--keyring", default="/etc/ceph/ceph.client.admin.keyring")
    options.add_argument("--client", default="admin", help="the client's id (admin for client.admin)")
    options.add_argument("--fs", default="", help="the CephFS file system")
    options.add_argument("--path", default="/", help="the directory in it to mount")
    options.add_argument("--method", choices=["auto", "kernel", "fuse"], default="auto")
    return call.answer_mounting(options.parse_args(argv), mount, _look, holds=True)


if __name__ == "__main__":
    raise SystemExit(main())
