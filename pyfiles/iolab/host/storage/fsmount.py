"""A generic `mount` backend (any file system the host can mount: a vendor NAS, Lustre, BeeGFS, a loop image) mounted
or unmounted in one call (host side; roles/storage_mount runs it, and the fan-out's steps: iolab.drive.steps):

    python -m iolab.host.storage.fsmount mounted|kept --name NAME --host HOST --mountpoint DIR --state-dir DIR
                                         --source SOURCE --fstype TYPE [--local-source PATH] [--readonly]
                                         [--option OPT ...]
                                         [--check-target TARGET --root MOUNT_ROOT [--existing]]
    python -m iolab.host.storage.fsmount unmounted|absent --name NAME --host HOST --mountpoint DIR --state-dir DIR
                                         [--unmount-wait S] [--stop-dir RUNS_DIR [--keep-archives]]

What the role's chain of tasks and storage.yml's checks did, in one process, in the same words. mounted, kept: with
--check-target, first iolab.host.mounts.target_refusal's check; then root, the mount point free (or our mount there
already, used as it is), a source and a type named, a directory or image file named as the source checked as one
iolab may use (--local-source, with --root); then the mount point, mount -t TYPE, the record of the mount, and on a
read-only mount a write checked to fail. A mount that fails is unmounted again, and the refusal names the step and,
where the host knows no such file system and has no mount helper for it, the client to install. unmounted,
absent: as iolab.host.storage.cephfs's (iolab.host.storage.call.release), with no client of its own. Prints {"kept":
bool, "changed": bool, "stopped": [...]}; a refusal is one line on stderr naming the host and the fix, exit 1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from typing import Any

from iolab.host import mounts
from iolab.host.storage import call


def mount(opts: argparse.Namespace) -> dict[str, Any]:
    call.check_target(opts)
    seen = _look(opts)
    call.preflight(seen, seen["ours"], opts.mountpoint, opts.host, "mounting")
    if not (opts.source and opts.fstype):
        raise call.Refused(f"backend {opts.name} must name source and fstype (e.g. source nas01:/export, fstype nfs)")
    if opts.local_source:
        reason, _ = mounts.target_refusal(opts.local_source, opts.root, True)
        if reason:
            raise call.Refused(reason)
    if seen["ours"]:  # a file system of ours that is mounted already is used as it is
        call.check_readonly(opts)
        return {"kept": seen["kept"], "changed": False}
    steps: call.Steps = [
        ("Create the mount point", lambda: os.makedirs(opts.mountpoint, mode=0o755, exist_ok=True)),
        ("Mount the file system", lambda: _mount(opts)),
        ("Record who mounted the file system", lambda: _record(opts)),
        ("Try a write to the read-only mount, which must fail", lambda: call.check_readonly(opts)),
    ]
    return call.mount_in_steps(
        opts, seen, lambda: _look(opts), steps, False, f"{opts.source} ({opts.fstype})", lambda: _hint(opts, seen)
    )


def _hint(opts: argparse.Namespace, seen: dict[str, Any]) -> str:
    """A failed mount's advice where the host knows no such type: the client to install."""
    helper = _helper(opts)
    if opts.fstype in seen["kernel"]["filesystems"] or seen["tools"][helper]:
        return ""
    return (
        f" ({opts.host} knows no file system type {opts.fstype} and has no {helper}: install its client, "
        "e.g. Lustre: lustre-client-utils and its modules, BeeGFS: beegfs-client, CurveFS: curve-fuse)"
    )


def _helper(opts: argparse.Namespace) -> str:
    """The mount helper a type needs where the kernel does not know it (FUSE file systems: mount.fuse3)."""
    return "mount.fuse3" if opts.fstype.startswith("fuse.") else f"mount.{opts.fstype}"


def _look(opts: argparse.Namespace) -> dict[str, Any]:
    tools = [_helper(opts), "mount.fuse"] if opts.fstype else []
    return mounts.probe(opts.mountpoint, opts.state_dir, opts.name, None, [], tools)


def _mount(opts: argparse.Namespace) -> None:
    options = (["ro"] if opts.readonly else []) + opts.option
    argv = ["mount", "-t", opts.fstype, *(["-o", ",".join(options)] if options else []), opts.source, opts.mountpoint]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise call.Refused(call.first_line(done.stderr, done.returncode))


def _record(opts: argparse.Namespace) -> None:
    call.record(opts, "mount", f"mount -t {opts.fstype}", requested_source=opts.source)


def main(argv: list[str] | None = None) -> int:
    options = call.mount_parser("iolab.host.storage.fsmount")
    options.add_argument("--source", default="")
    options.add_argument("--fstype", default="")
    options.add_argument("--local-source", default="", help="the source, where it is a directory or image file here")
    return call.answer_mounting(options.parse_args(argv), mount, _look, holds=False)


if __name__ == "__main__":
    raise SystemExit(main())
