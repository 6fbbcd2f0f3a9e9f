"""An rbd_snapshot backend's state in two calls (host side, stdlib only; roles/storage_rbd_snapshot runs them, and
the fan-out's steps: iolab.drive.steps):

    python -m iolab.host.storage.rbdsnapshot image --name NAME --host HOST --pool POOL --image IMAGE --snapshot SNAP
                                             --size BYTES --conf CEPH_CONF --keyring KEYRING --client ID --state-dir DIR
                                             [--source DIR | --dataset JSON] [--fio-size BYTES] [--link HOST ...]
                                             [--scratch] [--method auto|krbd|nbd|qemu-fuse] [--connect-timeout S]
    python -m iolab.host.storage.rbdsnapshot mounted|kept|unmounted|absent --name NAME --host HOST --mountpoint DIR
                                             --state-dir DIR --pool POOL --image IMAGE --snapshot SNAP [--scratch] [...]

What the role's chain of tasks (≈ 30 to 90 Ansible tasks a command, each ≈ 0.3 s: docs/PERFORMANCE.md) did, in the
same order and the same words.

image (once, on the first host, where the storage is put in place): the cluster answers and the pool exists
(iolab.host.storage.rbdimage's check); a scratch image is created if it is not there. Otherwise the snapshot: what it is
to hold (its content key: the source's manifest, the generated data set's identity, the fio file's size, the layout)
against iolab's record in the image's metadata (iolab.snapshot.SNAP); a snapshot that exists with the same key is
used as it is, one with another is refused (a snapshot never changes). A new one is loaded through a read-write
mapping of the image below the state directory: ext4 made, the source copied in (or the campaign's data set generated
and packed), its manifest, fio's file laid out, each host's directory a link to the root, the record written in the
image and in its metadata, then unmapped, snapshotted and protected. A step that fails releases everything below the
state directory and refuses naming it: the image then has no snapshot.

mounted, kept (each host): the look at the host (iolab.host.mounts.probe, with the image's krbd and rbd-nbd
mappings), root, the mount point free (or our mount there, used as it is), the cluster's files, the mapping the kernel
offers (auto: krbd, else rbd-nbd, else QEMU's storage daemon over FUSE with a read-only loop device), a scratch image
on one host only. A host without the mapping's programs replies {"install": METHOD}. Then the snapshot mapped
read-only (a scratch image read-write, its ext4 made the first time), mounted read-only with noload, the record of the
mount (how it is mapped, the snapshot's manifest hash and content key, from the record the snapshot holds), a write
checked to fail and this host's directory checked to be in the snapshot. A step that fails releases everything.

unmounted, absent: as iolab.host.storage.cephfs's (iolab.host.storage.call), the mapping released too: the file systems
below the state directory unmounted, the loop devices detached, krbd and rbd-nbd mappings unmapped, QEMU stopped.

Prints {"changed": bool, ...} (or {"install": METHOD}); a refusal is one line on stderr naming the fix, exit 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from iolab.host import mounts
from iolab.host.loader.dataset_state import sha256_file
from iolab.host.storage import call, rbdimage
from iolab.shared import fio_options

NEEDS = {"krbd": ("rbd",), "nbd": ("rbd", "rbd-nbd"), "qemu-fuse": ("rbd", "qemu-storage-daemon", "losetup")}
MODULE = {"krbd": "krbd", "nbd": "nbd", "qemu-fuse": "fuse"}  # what the kernel must offer each mapping
ADVICE = {
    "krbd": "the kernel of {host} ({release}) has no rbd module (krbd); load it (modprobe rbd) or set the backend's "
    "method to auto",
    "nbd": "{host} has no /dev/nbd* devices; load the nbd module (modprobe nbd) or set the backend's method to auto",
    "qemu-fuse": "{host} has no /dev/fuse, which QEMU's FUSE export needs (its kernel has neither krbd nor nbd); load "
    "the fuse module, or map on a host whose kernel has the rbd module",
}
LAYOUT = "iolab.rbd_snapshot/1"  # part of every content key: a new layout makes new snapshots
RECORD = ".iolab-snapshot.json"  # the snapshot's own record of what it holds, at its root


# --- the image, on the first host -----------------------------------------------------------------


def image(opts: argparse.Namespace) -> dict[str, Any]:
    """The snapshot (or the scratch image) there and holding what the backend asks for."""
    seen = _look(opts, opts.state_dir)
    how = _how(opts, seen)
    if missing := [tool for tool in (*NEEDS[how], "mkfs.ext4") if not seen["tools"][tool]]:
        return call.install(opts, how, " and ".join(missing))
    rbd = rbdimage.rbd_argv(opts)
    listed = rbdimage.run([*rbd, "ls", "--format", "json", opts.pool])
    if listed.returncode != 0:
        raise call.Refused(rbdimage.unreachable(opts, rbd, listed.stderr))
    exists = opts.image in json.loads(listed.stdout or "[]")
    if opts.scratch:
        if not exists:
            _create(opts)
        return {"changed": not exists}
    snaps: list[str] = []
    record: dict[str, Any] = {}
    if exists:
        listed = _ceph(opts, "snap", "ls", "--format", "json", _spec(opts))
        snaps = [snap["name"] for snap in json.loads(listed.stdout or "[]")]
        recorded = rbdimage.meta(rbd, _spec(opts), f"iolab.snapshot.{opts.snapshot}")
        record = json.loads(recorded) if recorded else {}
    wanted = _content_key(opts)
    loads = bool(opts.source or opts.dataset or opts.fio_size)
    if opts.snapshot in snaps:
        if loads and record.get("key", "") != wanted["key"]:
            holds = (
                f"other content (loaded by iolab at {record['loaded_at']} from "
                f"{record.get('source') or 'a generated data set'})"
                if record
                else "data iolab did not load"
            )
            raise call.Refused(
                f"snapshot {_snap_spec(opts)} exists but holds {holds}; a snapshot never changes: give the backend "
                f"another snapshot name, or remove the old one (rbd snap unprotect {_snap_spec(opts)}; rbd snap rm "
                f"{_snap_spec(opts)})"
            )
        return {"changed": False}
    if not loads:
        raise call.Refused(
            f"snapshot {_snap_spec(opts)} does not exist and backend {opts.name} has nothing to load into it; give it "
            "a source directory, fio_size, or a campaign dataset"
        )
    _load(opts, seen, how, exists, wanted)
    return {"changed": True}


def _load(opts: argparse.Namespace, seen: dict[str, Any], how: str, exists: bool, wanted: dict[str, Any]) -> None:
    """The image written through a read-write mapping of its own (below the state directory), released, then
    snapshotted; a failed step releases everything below the state directory and refuses."""
    load, record = f"{opts.state_dir}/load", {}
    fs, manifest = f"{load}/fs", {}
    steps: call.Steps = [] if exists else [("Create the image", lambda: _create(opts))]
    steps += [
        ("Map the image read-write for loading", lambda: seen.update(device=_attach(opts, how, load, "", False))),
        ("Make an ext4 file system on the image", lambda: _run(_mkfs(seen["device"]))),
        ("Create the directory the image is loaded at", lambda: os.makedirs(fs, mode=0o700, exist_ok=True)),
        ("Mount the image read-write for loading", lambda: _run(["mount", "-t", "ext4", seen["device"], fs])),
        ("Create the data set's directory", lambda: os.makedirs(f"{fs}/dataset", mode=0o755, exist_ok=True)),
    ]
    if opts.source:
        copy = ["cp", "-a", "--no-target-directory", opts.source, f"{fs}/dataset"]
        steps.append(("Copy the source directory into the image", lambda: _run(copy)))
    elif opts.dataset:
        steps.append(("Generate the campaign's data set into the image", lambda: _generate(opts, f"{fs}/dataset")))
    if opts.source or opts.dataset:
        steps.append(
            (
                "Write the data set's manifest where the source has none",
                lambda: manifest.update(_manifest(f"{fs}/dataset")),
            )
        )
    if opts.fio_size:
        steps.append(("Lay out the fio data file", lambda: _run(_layout(f"{fs}/iolab-fio.dat", opts.fio_size))))
    steps += [
        ("Link each host's directory to the image's root", lambda: _links(fs, opts.link)),
        ("Describe the content in the image too", lambda: record.update(_describe(opts, fs, wanted, manifest))),
        ("Unmount the loaded image", lambda: _run(["umount", fs])),
        ("Release the read-write mapping", lambda: _free(opts, load, ["-"])),
        ("Snapshot the image", lambda: _ceph(opts, "snap", "create", _snap_spec(opts))),
        ("Protect the snapshot", lambda: _ceph(opts, "snap", "protect", _snap_spec(opts))),
        (
            "Record what the snapshot holds in the image's metadata",
            lambda: _ceph(
                opts, "image-meta", "set", _spec(opts), f"iolab.snapshot.{opts.snapshot}", json.dumps(record)
            ),
        ),
    ]

    def failed(step: str, why: str) -> str:
        _free(opts, opts.state_dir, ["-", opts.snapshot])
        return (
            f"loading {_spec(opts)} failed at '{step}': {why}; nothing is left mapped on {opts.host}, and the image "
            f"has no snapshot {opts.snapshot}: fix the cause and run again"
        )

    call.in_steps(steps, failed)


def _content_key(opts: argparse.Namespace) -> dict[str, Any]:
    if opts.source and not os.path.isdir(opts.source):
        raise call.Refused(f"source {opts.source} is not a directory on {opts.host}")
    extra = {"layout": LAYOUT, "fs": "ext4", "dataset": opts.dataset, "fio_size": opts.fio_size}
    return mounts.content_key(opts.source or None, extra)


def _create(opts: argparse.Namespace) -> None:
    _run(rbdimage.create_argv(rbdimage.rbd_argv(opts), _spec(opts), opts.size))


def _generate(opts: argparse.Namespace, root: str) -> None:
    """The campaign's data set generated into the image, then packed as the workloads read it."""
    gen = [sys.executable, "-m", "iolab.host.dataset", "gen", root, "--files", str(opts.dataset["files"])]
    gen += ["--seed", str(opts.dataset.get("seed", 1)), "--classes", str(opts.dataset.get("classes", 100))]
    _run([*gen, "--kind", str(opts.dataset.get("kind", "imagenet-like")), "--json"])
    for fmt in opts.dataset.get("formats") or []:
        _run([sys.executable, "-m", "iolab.host.dataset", "pack", root, "--format", fmt, "--json"])


def _manifest(root: str) -> dict[str, Any]:
    """The data set's manifest (every file's size and sha256) where the source has none; its hash."""
    path = os.path.join(root, mounts.MANIFEST_NAME)
    if not os.path.isfile(path):
        with open(path, "wb") as out:
            out.write(mounts.build_manifest(Path(root)))
    return {"manifest_hash": sha256_file(Path(path))}


def _layout(path: str, size: int) -> list[str]:
    """As bench_fio lays out its file (iolab.shared.fio_options.LAY_OUT): incompressible, read back without a layout."""
    return [
        *fio_options.LAY_OUT,
        "--name=iolab",
        f"--filename={path}",
        f"--size={size}",
        "--rw=read",
        "--ioengine=psync",
    ]


def _links(fs: str, hosts: list[str]) -> None:
    """Workloads look in <mount>/iolab-<host>: on a shared snapshot every host reads the one copy."""
    for host in hosts:
        link = f"{fs}/iolab-{host}"
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(".", link)


def _describe(opts: argparse.Namespace, fs: str, wanted: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    record = {
        "key": wanted["key"],
        "manifest_hash": manifest.get("manifest_hash"),
        "source": opts.source or None,
        "dataset": opts.dataset,
        "fio_size": opts.fio_size,
        "hosts": sorted(opts.link),
        "loaded_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "loaded_by": opts.host,
    }
    with open(f"{fs}/{RECORD}", "w") as out:
        out.write(json.dumps(record, indent=4, sort_keys=True) + "\n")
    os.chmod(f"{fs}/{RECORD}", 0o644)
    return record


# --- each host's mapping ------------------------------------------------------------------------------


def mount(opts: argparse.Namespace) -> dict[str, Any]:
    call.check_target(opts)
    seen = _look(opts, opts.state_dir)
    held = seen["held"]
    devices = held["loops"] + [m["device"] for m in held["krbd"] + held["nbd"]]
    ours = seen["ours"] or (seen["mounted"] or {}).get("source", "") in devices
    call.preflight(seen, ours, opts.mountpoint, opts.host, "mapping an RBD snapshot")
    call.check_ceph_files(opts)
    how = _how(opts, seen)
    if not ours and not seen["kernel"][MODULE[how]]:
        raise call.Refused(ADVICE[how].format(host=opts.host, release=seen["kernel"]["release"]))
    if opts.scratch and opts.hosts > 1:  # one ext4 file system mounted read-write by two hosts would be corrupted
        raise call.Refused(
            f"backend {opts.name} (scratch: true) maps {_spec(opts)} read-write with one ext4 file system, which "
            f"{opts.hosts} hosts cannot share; select one host, or give each host a backend of its own (another image)"
        )
    if ours:  # a snapshot of ours that is mounted already is used as it is; the write check runs anyway
        _verify(opts)
        return {"kept": seen["kept"], "changed": False}
    if missing := [tool for tool in (*NEEDS[how], "mkfs.ext4") if not seen["tools"][tool]]:
        return call.install(opts, how, " and ".join(missing))
    steps: call.Steps = [
        ("Create the mount point", lambda: os.makedirs(opts.mountpoint, mode=0o755, exist_ok=True)),
        (
            "Map the snapshot read-only (a scratch image read-write)",
            lambda: seen.update(
                device=_attach(opts, how, opts.state_dir, "" if opts.scratch else opts.snapshot, not opts.scratch)
            ),
        ),
    ]
    if opts.scratch:
        steps.append(("Make the scratch image's ext4 file system, the first time", lambda: _scratch_fs(seen)))
    steps += [
        ("Mount the snapshot read-only (a scratch image read-write)", lambda: _mount(opts, seen["device"])),
        ("Record who mounted the snapshot and how it is mapped", lambda: _record(opts, how, seen["device"])),
        ("Check that a write to the snapshot fails", lambda: _verify(opts)),
    ]
    spec = _spec(opts) if opts.scratch else f"{_snap_spec(opts)} read-only"
    return call.mount_in_steps(
        opts, seen, lambda: _look(opts, opts.state_dir), steps, True, f"{spec} ({how})", detach=lambda: _detach(opts)
    )


def _how(opts: argparse.Namespace, seen: dict[str, Any]) -> str:
    if opts.method != "auto":
        return opts.method
    return "krbd" if seen["kernel"]["krbd"] else "nbd" if seen["kernel"]["nbd"] else "qemu-fuse"


def _attach(opts: argparse.Namespace, how: str, directory: str, snapshot: str, readonly: bool) -> str:
    """The image (or its snapshot) mapped as a block device; its path. Everything it holds lives in `directory`, or
    names it, so that a teardown finds it."""
    spec = f"{_spec(opts)}@{snapshot}" if snapshot else _spec(opts)
    ro = ["--read-only"] if readonly else []
    if how == "krbd":
        return _ceph(opts, "device", "map", *ro, spec).stdout.strip()
    if how == "nbd":
        nbd = ["rbd-nbd", "map", "--conf", opts.conf, "--keyring", opts.keyring, "--id", opts.client, *ro, spec]
        return _run(nbd).stdout.strip()
    # QEMU's storage daemon opens the image through librbd and exports it as a file over FUSE; a loop device on that
    # file is the block device. The key goes from the keyring to a root-only file, read by QEMU's secret object.
    mounts.state_dir(directory, opts.keyring, f"client.{opts.client}", ["image"])
    blockdev: dict[str, Any] = {
        "driver": "rbd",
        "node-name": "iolab",
        "pool": opts.pool,
        "image": opts.image,
        "conf": opts.conf,
    }
    blockdev |= {"user": opts.client, "key-secret": "iolab-key", "read-only": readonly}
    blockdev |= {"snapshot": snapshot} if snapshot else {}
    secret = {"qom-type": "secret", "id": "iolab-key", "file": f"{directory}/key", "format": "base64"}
    export: dict[str, Any] = {"type": "fuse", "id": "iolab", "node-name": "iolab", "mountpoint": f"{directory}/image"}
    export |= {"writable": not readonly}
    qemu = ["qemu-storage-daemon", "--daemonize", "--pidfile", f"{directory}/qemu-storage-daemon.pid"]
    _run([*qemu, "--object", json.dumps(secret), "--blockdev", json.dumps(blockdev), "--export", json.dumps(export)])
    # Direct I/O: reads go to QEMU (and so to the cluster), not to a second copy of the export's pages.
    losetup = ["losetup", "--find", "--show", "--direct-io=on", *ro, f"{directory}/image"]
    return _run(losetup).stdout.strip()


def _mkfs(device: str) -> list[str]:
    return ["mkfs.ext4", "-F", "-q", "-m", "0", "-L", "iolab", "-E", "nodiscard", device]


def _scratch_fs(seen: dict[str, Any]) -> None:
    found = subprocess.run(["blkid", "-p", seen["device"]], capture_output=True, text=True, check=False)
    if found.returncode == 2:  # no file system on the device: a new image
        _run(_mkfs(seen["device"]))
    elif found.returncode != 0:
        raise call.Refused(call.first_line(found.stderr, found.returncode))


def _mount(opts: argparse.Namespace, device: str) -> None:
    # noload: never replay a journal on a device that cannot be written
    options = (["rw"] if opts.scratch else ["ro", "noload"]) + opts.option
    _run(["mount", "-t", "ext4", "-o", ",".join(options), device, opts.mountpoint])


def _record(opts: argparse.Namespace, how: str, device: str) -> None:
    holds = {} if opts.scratch else _holds(opts.mountpoint)
    call.record(
        opts,
        "rbd_snapshot",
        how,
        readonly=not opts.scratch,
        device=device,
        snapshot=_spec(opts) if opts.scratch else _snap_spec(opts),
        dataset_manifest_hash=holds.get("manifest_hash"),
        content_key=holds.get("key"),
    )


def _holds(mountpoint: str) -> dict[str, Any]:
    """The snapshot's own record of what it holds (written when it was loaded), or {} (loaded by another tool)."""
    try:
        with open(f"{mountpoint}/{RECORD}") as found:
            return dict(json.load(found))
    except (OSError, ValueError):
        return {}


def _verify(opts: argparse.Namespace) -> None:
    """Data safety: the snapshot's mount refuses writes; and it holds this host's directory (made for the hosts the
    inventory had when it was loaded)."""
    if opts.scratch:
        return
    refused, said = mounts.check_readonly(opts.mountpoint)
    if not refused:
        raise call.Refused(said)
    if not os.path.lexists(f"{opts.mountpoint}/iolab-{opts.host}"):
        raise call.Refused(
            f"snapshot {_snap_spec(opts)} was made for other hosts: it has no iolab-{opts.host} (workloads read "
            "there); give the backend another snapshot name, and iolab makes one for this inventory"
        )


# --- releasing --------------------------------------------------------------------------------------


def _detach(opts: argparse.Namespace) -> None:
    """What the mapping holds below the state directory, released before its daemons are stopped."""
    _free(opts, opts.state_dir, ["-", opts.snapshot], stop=False)


def _free(opts: argparse.Namespace, directory: str, snaps: list[str], stop: bool = True) -> None:
    """Release everything below `directory`, whatever state a failure left it in: its file systems, the loop devices
    of the FUSE export, the kernel's and rbd-nbd's mappings of the image (`snaps`: '-' the image itself), then (`stop`)
    the daemons that name it and the directory with the key."""
    for below in mounts.mounts_below(directory):
        if not below["fstype"].startswith("fuse"):
            _run(["umount", below["target"]])
    for loop in mounts.loops(directory):
        _run(["losetup", "--detach", loop])
    mapped = mounts.rbd_mappings(_spec(opts))
    for krbd in mapped["krbd"]:
        if krbd["snap"] in snaps:
            _ceph(opts, "device", "unmap", krbd["device"])
    for nbd in mapped["nbd"]:
        if nbd["snap"] in snaps:
            _run(["rbd-nbd", "unmap", nbd["device"]])
    if stop:
        if mounts.stop(directory, opts.stop_timeout)["left"]:
            raise call.Refused(f"processes naming {directory} survived SIGKILL")
        shutil.rmtree(directory, ignore_errors=True)


# --- the calls' means ---------------------------------------------------------------------------------


def _look(opts: argparse.Namespace, directory: str) -> dict[str, Any]:
    tools = sorted({tool for names in NEEDS.values() for tool in names} | {"mkfs.ext4"})
    return mounts.probe(opts.mountpoint, directory, opts.name, _spec(opts), ["rbd", "nbd"], tools)


def _spec(opts: argparse.Namespace) -> str:
    return f"{opts.pool}/{opts.image}"


def _snap_spec(opts: argparse.Namespace) -> str:
    return f"{_spec(opts)}@{opts.snapshot}"


def _ceph(opts: argparse.Namespace, *args: str) -> subprocess.CompletedProcess[str]:
    return _run([*rbdimage.rbd_argv(opts), *args])


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """An argv run to its end; its failure refused in its first line of complaint."""
    done = rbdimage.run(argv)
    if done.returncode != 0:
        raise call.Refused(call.first_line(done.stderr, done.returncode))
    return done


def main(argv: list[str] | None = None) -> int:
    options = call.mount_parser("iolab.host.storage.rbdsnapshot")
    options.add_argument("--pool", required=True)
    options.add_argument("--image", required=True)
    options.add_argument("--snapshot", required=True)
    options.add_argument("--scratch", action="store_true", help="the image itself, read-write, on one host")
    options.add_argument("--conf", default="/var/lib/iolab/ceph/ceph.conf")
    options.add_argument("--keyring", default="/var/lib/iolab/ceph/ceph.client.admin.keyring")
    options.add_argument("--client", default="admin", help="the client's id (admin for client.admin)")
    options.add_argument("--connect-timeout", type=int, default=15, help="s a Ceph command waits for the monitors")
    options.add_argument("--method", choices=["auto", "krbd", "nbd", "qemu-fuse"], default="auto")
    options.add_argument("--hosts", type=int, default=1, help="mounted, kept: how many hosts map it at once")
    options.add_argument("--size", type=int, default=10 << 30, help="image: its size, bytes")
    options.add_argument("--source", default="", help="image: a directory on this host to load")
    options.add_argument("--dataset", type=json.loads, default={}, help="image: the data set to generate (JSON)")
    options.add_argument("--fio-size", type=int, default=0, help="image: a fio file of this many bytes")
    options.add_argument("--link", action="append", default=[], help="image: a host whose directory to link")
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["image"]:  # the first host's call: the state "mounted" stands for it in the parser
        opts = options.parse_args(["mounted", *argv[1:]])
        return call.answer(opts, image, lambda _: {})
    opts = options.parse_args(argv)
    return call.answer_mounting(opts, mount, lambda opts: _look(opts, opts.state_dir), True, _detach)


if __name__ == "__main__":
    raise SystemExit(main())
