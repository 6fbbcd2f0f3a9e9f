"""An NFS backend mounted or unmounted in one call (host side; roles/storage_nfs runs it, and the fan-out's steps:
iolab.drive.steps):

    python -m iolab.host.storage.nfs mounted|kept --name NAME --host HOST --mountpoint DIR --state-dir DIR
                                     --server NAME --export PATH [--version 3|4|4.0|4.1|4.2] [--port N] [--mount-port N]
                                     [--method auto|kernel|fuse] [--readonly] [--option OPT ...] [--check-timeout S]
                                     [--fuse-package NAME==VERSION ...]
                                     [--check-target TARGET --root MOUNT_ROOT [--existing]]
    python -m iolab.host.storage.nfs unmounted|absent --name NAME --host HOST --mountpoint DIR --state-dir DIR
                                     [--stop-timeout S] [--unmount-wait S] [--stop-dir RUNS_DIR [--keep-archives]]

What the role's chain of tasks and storage.yml's checks did (≈ 20 Ansible tasks over two playbooks a command), in one
process, in the same words. mounted, kept: with --check-target, first iolab.host.mounts.target_refusal's check; then a
look at the host (iolab.host.mounts.probe); root, the mount point free (or our mount there already, used as it is),
a server named; the client chosen (auto: the kernel's where it has the nfs module, else iolab's userspace client over
FUSE, iolab.host.storage.nfs_fuse), and for FUSE, /dev/fuse and a version nfs-rs speaks. A host that lacks a program or
package replies {"install": [what: nfs-ls, mount.nfs, fuse, pip]} and mounts nothing: the role installs them (each
OS's package names are its) and calls again; the fan-out's step leaves the whole step to Ansible. Then the export
listed with libnfs's nfs-ls (from userspace: whether or not the kernel has a client), the kernel's client checked,
the mount point, the mount (mount -t nfs, or the FUSE client's process, its log in the state directory), the record
of the mount (iolab.host.mounts), and on a read-only mount a write checked to fail. A step that fails releases
everything the mount held and refuses naming the step.

unmounted: our mount unmounted, unless it is kept; absent: whoever mounted it: as iolab.host.storage.cephfs's
(iolab.host.storage.call.release), the FUSE client stopped. Prints {"kept": bool, "changed": bool, "stopped": [...]}
(or {"install": [...]}); a refusal is one line on stderr naming the host and the fix, exit 1.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
from typing import Any

from iolab.host import mounts, pinned
from iolab.host.storage import call, nfs_fuse

FUSE_VERSIONS = ("3", "4.0", "4.1")  # what nfs-rs speaks ("4" is 4.0 there; it has no 4.2)


def mount(opts: argparse.Namespace) -> dict[str, Any]:
    call.check_target(opts)
    seen = _look(opts)
    ours = seen["ours"]
    call.preflight(seen, ours, opts.mountpoint, opts.host, "mounting NFS")
    if not opts.server:
        raise call.Refused(f"backend {opts.name} names no server; give it server NAME and export /PATH")
    how = opts.method if opts.method != "auto" else "kernel" if seen["kernel"]["nfs"] else "fuse"
    if ours:  # an export of ours that is mounted already is used as it is
        call.check_readonly(opts)
        return {"kept": seen["kept"], "changed": False}
    if how == "fuse" and not (seen["kernel"]["fuse"] and _fuse_version(opts) in FUSE_VERSIONS):
        raise call.Refused(
            f"NFSv{opts.version} is not one the FUSE client (nfs-rs) speaks; give the backend version 3, 4.0 or 4.1"
            if seen["kernel"]["fuse"]
            else f"{opts.host} has neither an NFS client in its kernel nor /dev/fuse for the userspace one; load the "
            "nfs or the fuse module"
        )
    needs = [] if seen["tools"]["nfs-ls"] else ["nfs-ls"]
    if how == "kernel" and seen["kernel"]["nfs"] and not seen["tools"]["mount.nfs"]:
        needs.append("mount.nfs")
    pins = pinned.missing(opts.fuse_package) if how == "fuse" else []
    if how == "fuse":
        needs += ([] if seen["tools"]["fusermount3"] else ["fuse"]) + (["pip"] if pins else [])
    if needs:
        said = {"nfs-ls": "nfs-ls", "mount.nfs": "mount.nfs", "fuse": "fusermount3", "pip": " and ".join(pins)}
        return call.install(opts, needs, " and ".join(said[what] for what in needs))
    _listed(opts)
    if how == "kernel" and not seen["kernel"]["nfs"]:
        raise call.Refused(
            f"the export answers, but the kernel of {opts.host} ({seen['kernel']['release']}) has no NFS client (no "
            "nfs in /proc/filesystems, and modprobe nfs loaded none), so it cannot be mounted with method kernel; "
            "load the nfs module (modprobe nfs), or set the backend's method to auto or fuse (iolab's userspace "
            "client; docs/LAB_PITFALLS.md)"
        )
    steps: call.Steps = [("Create the mount point", lambda: os.makedirs(opts.mountpoint, mode=0o755, exist_ok=True))]
    if how == "kernel":
        steps.append(("Mount the export with the kernel's NFS client", lambda: _kernel_mount(opts)))
    else:
        steps.append(("Create the backend's directory (the FUSE client's log)", lambda: _state_dir(opts)))
        steps.append(("Mount the export with iolab's FUSE client (nfs-rs)", lambda: _fuse_mount(opts)))
    steps.append(("Record who mounted the export and with which client", lambda: _record(opts, how)))
    steps.append(("Try a write to the read-only mount, which must fail", lambda: call.check_readonly(opts)))
    return call.mount_in_steps(opts, seen, lambda: _look(opts), steps, False, f"{opts.server}:{opts.export} ({how})")


def _look(opts: argparse.Namespace) -> dict[str, Any]:
    tools = ["nfs-ls", "mount.nfs", "fusermount3"]
    return mounts.probe(opts.mountpoint, opts.state_dir, opts.name, None, ["nfs", "fuse"], tools)


def _major(opts: argparse.Namespace) -> str:
    return opts.version.split(".")[0]


def _fuse_version(opts: argparse.Namespace) -> str:
    return "4.0" if opts.version == "4" else opts.version


def _url(opts: argparse.Namespace, version: str) -> str:
    """libnfs's (and nfs-rs's) URL of the export; its ports where the backend names them."""
    url = f"nfs://{opts.server}{opts.export}?version={version}"
    url += f"&nfsport={opts.port}" if opts.port > 0 else ""
    return url + (f"&mountport={opts.mount_port}" if opts.mount_port > 0 and _major(opts) == "3" else "")


def _listed(opts: argparse.Namespace) -> None:
    """libnfs speaks NFS from userspace: the server and the export checked from this host, kernel client or not."""
    url = _url(opts, _major(opts))
    argv = ["timeout", f"{opts.check_timeout:g}", "nfs-ls", url]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = call.last_line(done.stderr) if done.stderr.strip() else f"no answer in {opts.check_timeout:g} s"
        raise call.Refused(
            f"export {opts.server}:{opts.export} (NFSv{opts.version}) does not answer {opts.host}: nfs-ls {url} said "
            f"\"{said}\"; check the server's address, export and ports (the lab's server: `invoke lab.services-up`, "
            "with --bind 10.77.0.1 for simulated hosts)"
        )


def _kernel_mount(opts: argparse.Namespace) -> None:
    options = [f"vers={opts.version}"] + ([f"port={opts.port}"] if opts.port > 0 else [])
    options += [f"mountport={opts.mount_port}", "nolock"] if opts.mount_port > 0 and _major(opts) == "3" else []
    options += (["ro"] if opts.readonly else []) + opts.option
    argv = ["mount", "-t", "nfs", "-o", ",".join(options), f"{opts.server}:{opts.export}", opts.mountpoint]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise call.Refused(call.first_line(done.stderr, done.returncode))


def _state_dir(opts: argparse.Namespace) -> None:
    mounts.state_dir(opts.state_dir, None, None, [])


def _fuse_mount(opts: argparse.Namespace) -> None:
    """The FUSE client's process runs on in a session of its own; this returns once the export is mounted."""
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        code = nfs_fuse.mount(_url(opts, _fuse_version(opts)), opts.mountpoint, opts.state_dir, opts.readonly)
    if code != 0:
        raise call.Refused(call.first_line(said.getvalue(), code))


def _record(opts: argparse.Namespace, how: str) -> None:
    pins = dict(spec.partition("==")[::2] for spec in opts.fuse_package)
    client = "kernel" if how == "kernel" else f"nfs-rs {pins.get('nfs-rs', '')} (FUSE)"
    call.record(opts, "nfs", how, client=client, version=opts.version if how == "kernel" else _fuse_version(opts))


def main(argv: list[str] | None = None) -> int:
    options = call.mount_parser("iolab.host.storage.nfs")
    options.add_argument("--server", default="")
    options.add_argument("--export", default="/")
    options.add_argument("--version", default="4.1", choices=["3", "4", "4.0", "4.1", "4.2"])
    options.add_argument("--port", type=int, default=0, help="the NFS port, where not the standard one")
    options.add_argument("--mount-port", type=int, default=0, help="NFSv3's MOUNT port, where not the standard one")
    options.add_argument("--method", choices=["auto", "kernel", "fuse"], default="auto")
    options.add_argument("--check-timeout", type=float, default=20.0, help="s nfs-ls waits for the server")
    options.add_argument("--fuse-package", action="append", default=[], help="the FUSE client's pinned packages")
    return call.answer_mounting(options.parse_args(argv), mount, _look, holds=False)


if __name__ == "__main__":
    raise SystemExit(main())
