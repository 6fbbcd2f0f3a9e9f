"""An sshfs backend mounted or unmounted in one call (host side, stdlib only; roles/storage_sshfs runs it, and the
fan-out's steps: iolab.drive.steps):

    python -m iolab.host.storage.sshfs mounted|kept --name NAME --host HOST --mountpoint DIR --state-dir DIR
                                       --server HOST --address ADDRESS --user USER --port PORT --path PATH
                                       [--key-on-stdin] [--readonly] [--option OPT ...]
                                       [--check-target TARGET --root MOUNT_ROOT [--existing]]
    python -m iolab.host.storage.sshfs unmounted|absent --name NAME --host HOST --mountpoint DIR --state-dir DIR
                                       [--stop-timeout S] [--unmount-wait S] [--stop-dir RUNS_DIR [--keep-archives]]

What the role's chain of tasks and storage.yml's checks did (≈ 15 Ansible tasks and two playbooks a command), in one
process, in the same words. mounted, kept: the look at the host (iolab.host.mounts.probe), root, the mount point free
(or our mount there, used as it is), /dev/fuse, the serving host in the inventory (the controller gives its address,
user and port: none where it is not); a host without sshfs replies {"install": "sshfs"}. Then the mount point, the
state directory (root only) with the serving host's login key in it where the inventory names one (--key-on-stdin:
the key comes on stdin, never in an argv, a file of the controller's or a log), sshfs (each option its own -o; the
known-hosts file in the state directory also names sshfs and its ssh there, for teardown), the record of the mount,
and on a read-only mount a write checked to fail. A step that fails releases everything the mount held and refuses
naming the step.

unmounted, absent: as iolab.host.storage.cephfs's (iolab.host.storage.call): sshfs and its ssh stopped with the mount.

Prints {"kept": bool, "changed": bool, "stopped": [...]} (or {"install": "sshfs"}); a refusal is one line on stderr
naming the host and the fix, exit 1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any

from iolab.host import mounts
from iolab.host.storage import call


def mount(opts: argparse.Namespace) -> dict[str, Any]:
    call.check_target(opts)
    seen = _look(opts)
    call.preflight(seen, seen["ours"], opts.mountpoint, opts.host, "mounting with sshfs as iolab does")
    if not seen["kernel"]["fuse"]:
        raise call.Refused(f"{opts.host} has no /dev/fuse, which sshfs needs; load the fuse module")
    if not opts.address:
        raise call.Refused(
            f"host {opts.server} of backend {opts.name} is not in the inventory; name one of its hosts (it is reached "
            "as the inventory says - ansible_host, ansible_user, its key)"
        )
    if seen["ours"]:  # a directory of ours that is mounted already is used as it is
        call.check_readonly(opts)
        return {"kept": seen["kept"], "changed": False}
    if not seen["tools"]["sshfs"]:
        return call.install(opts, "sshfs", "sshfs")
    key = sys.stdin.buffer.read() if opts.key_on_stdin else b""
    steps: call.Steps = [
        ("Create the mount point", lambda: os.makedirs(opts.mountpoint, mode=0o755, exist_ok=True)),
        (
            "Create the backend's directory, only root may read it, with the serving host's key",
            lambda: _state(opts, key),
        ),
        ("Mount the directory with sshfs", lambda: _mount(opts, bool(key))),
        ("Record who mounted the directory", lambda: _record(opts)),
        ("Check that a write to the read-only mount fails", lambda: call.check_readonly(opts)),
    ]
    return call.mount_in_steps(opts, seen, lambda: _look(opts), steps, True, f"{opts.server}:{opts.path} with sshfs")


def _look(opts: argparse.Namespace) -> dict[str, Any]:
    return mounts.probe(opts.mountpoint, opts.state_dir, opts.name, None, ["fuse"], ["sshfs"])


def _state(opts: argparse.Namespace, key: bytes) -> None:
    os.makedirs(opts.state_dir, mode=0o700, exist_ok=True)
    os.chmod(opts.state_dir, 0o700)
    if key:
        fd = os.open(f"{opts.state_dir}/key", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key)


def _mount(opts: argparse.Namespace, key: bool) -> None:
    argv = ["sshfs", f"{opts.user}@{opts.address}:{opts.path}", opts.mountpoint, "-p", str(opts.port)]
    ssh = ["BatchMode=yes", "StrictHostKeyChecking=no", f"UserKnownHostsFile={opts.state_dir}/known_hosts"]
    ssh += ["ControlMaster=no", "ServerAliveInterval=15", "ServerAliveCountMax=3", "reconnect"]
    ssh += [f"IdentityFile={opts.state_dir}/key", "IdentitiesOnly=yes"] if key else []
    for option in ssh + (["ro"] if opts.readonly else []) + opts.option:  # each its own -o: no value split at a comma
        argv += ["-o", option]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise call.Refused(
            f"{call.first_line(done.stderr, done.returncode)} ({opts.server} is reached as {opts.user}@{opts.address} "
            f"port {opts.port}: check that it answers over SSH with the inventory's key and has the directory, or "
            f"point backend {opts.name}'s path at one)"
        )


def _record(opts: argparse.Namespace) -> None:
    call.record(opts, "sshfs", "sshfs", server=f"{opts.server}:{opts.path}")


def main(argv: list[str] | None = None) -> int:
    options = call.mount_parser("iolab.host.storage.sshfs")
    options.add_argument("--server", default="", help="the serving host's inventory name")
    options.add_argument("--address", default="", help="its address ('': not in the inventory)")
    options.add_argument("--user", default="root")
    options.add_argument("--port", type=int, default=22)
    options.add_argument("--path", default="/var/tmp", help="the directory on the serving host")
    options.add_argument("--key-on-stdin", action="store_true", help="the serving host's login key, on stdin")
    return call.answer_mounting(options.parse_args(argv), mount, _look, holds=True)


if __name__ == "__main__":
    raise SystemExit(main())
