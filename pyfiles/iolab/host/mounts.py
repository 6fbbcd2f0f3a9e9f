"""The storage calls' eyes and hands on a host (iolab.host.storage): what is mounted and held, and who mounted it
(stdlib only): probe, record and forget a mount, check_readonly, target_refusal, stop a backend's state directory's
processes, state_dir, a snapshot's content_key.

Who mounted what: a storage call that mounts a backend writes a record of the mount
to /run/iolab/mounts/<mount id>.json (backend, type, how it was attached, read-only,
kept or not). Mount ids are unique across mount namespaces, so simulated hosts
sharing one /run never mix their records up, and `iolab.host.facts` adds the record to
the provenance of every run on that mount.

What a backend holds: each host keeps a backend's state under its own directory
(/run/iolab/storage/<host>/<backend>): PID files, a FUSE export, keys. `probe` finds
everything that refers to it — mounts below it, loop devices backed by a file in it,
processes whose command line names it — so teardown releases exactly that, even
after a failure partway, and can check that nothing is left.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from iolab.host.loader.dataset_state import sha256_file
from iolab.shared import mountinfo as shared_mountinfo
from iolab.shared.confine import host_refusal
from iolab.shared.processes import terminate

RECORDS = Path("/run/iolab/mounts")


# --- what is mounted ------------------------------------------------------------------------------


def mountinfo() -> list[dict[str, Any]]:
    """This mount namespace's mounts, in mount order: id, target, source, fstype, options (iolab.shared.mountinfo)."""
    return shared_mountinfo.parse(Path("/proc/self/mountinfo").read_text())


def mounted_at(target: str) -> dict[str, Any] | None:
    """The file system mounted at `target` (the topmost one), or None."""
    found = [m for m in mountinfo() if m["target"] == target.rstrip("/") or (target == "/" and m["target"] == "/")]
    if not found:
        return None
    top = found[-1]
    return {**top, "readonly": "ro" in top["options"].split(",")}


# --- records of who mounted what ------------------------------------------------------------------


def record(target: str, info: dict[str, Any]) -> dict[str, Any]:
    """Write the record of the mount now at `target`."""
    mount = mounted_at(target)
    if mount is None:
        raise SystemExit(f"nothing is mounted at {target}: no record written")
    data = {
        **info,
        "target": mount["target"],
        "source": mount["source"],
        "fstype": mount["fstype"],
        "mount_id": mount["id"],
        "recorded_at": time.time(),
    }
    RECORDS.mkdir(parents=True, exist_ok=True)
    path = RECORDS / f"{mount['id']}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data, sort_keys=True))
    tmp.replace(path)
    return data


def record_for(mount: dict[str, Any] | None) -> dict[str, Any] | None:
    """iolab's record of a mount, if the record is of this very mount (not of an earlier one with its id)."""
    if not mount:
        return None
    try:
        data = json.loads((RECORDS / f"{mount['id']}.json").read_text())
    except (OSError, ValueError):
        return None
    same = (
        data.get("target") == mount["target"]
        and data.get("source") == mount["source"]
        and data.get("fstype") == mount["fstype"]
    )
    return data if same else None


def target_refusal(target: str, root: str, existing: bool) -> tuple[str, bool]:
    """check-target: why `target` is no place for iolab to mount on or write into, as one line naming this host
    ('' when it is; iolab.shared.confine.host_refusal), and whether what is mounted there is iolab's."""
    mount = mounted_at(target)
    ours = record_for(mount) is not None or (mount or {}).get("source", "").startswith("iolab:")
    reason = host_refusal(target, root, existing, ours)
    return (f"{platform.node()}: {reason}" if reason else ""), ours


def forget(target: str) -> bool:
    """Remove the record of the mount now at `target` (before unmounting it)."""
    mount = mounted_at(target)
    if mount is None or record_for(mount) is None:
        return False
    (RECORDS / f"{mount['id']}.json").unlink(missing_ok=True)
    return True


# --- what a backend's state directory holds ------------------------------------------------------


def _ancestors() -> set[int]:
    """This process and its parents: they name the state directory in their arguments too."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pids


def processes(state_dir: str) -> list[dict[str, Any]]:
    """Live processes with an argument that names a path in `state_dir` (daemons a backend started)."""
    prefix, found, skip = state_dir.rstrip("/") + "/", [], _ancestors()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        try:
            argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv if a]
        if state not in ("Z", "X") and any(prefix in a or a == state_dir.rstrip("/") for a in args):
            found.append({"pid": int(entry.name), "argv": args[:3]})
    return found


def loops(state_dir: str) -> list[str]:
    """Loop devices backed by a file in `state_dir` (the loop devices are the whole machine's)."""
    prefix, found = state_dir.rstrip("/") + "/", []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            if backing.read_text().strip().startswith(prefix):
                found.append(f"/dev/{backing.parent.parent.name}")
    return sorted(found)


def mounts_below(state_dir: str) -> list[dict[str, Any]]:
    """Mounts on paths in `state_dir`, the last mounted first (the order to unmount them)."""
    prefix = state_dir.rstrip("/") + "/"
    return [
        {"target": m["target"], "fstype": m["fstype"]} for m in reversed(mountinfo()) if m["target"].startswith(prefix)
    ]


def rbd_mappings(image: str) -> dict[str, list[dict[str, str]]]:
    """Kernel (krbd) and rbd-nbd devices mapping POOL/IMAGE on this host, each with its snapshot ('-': none)."""
    pool, _, name = image.partition("/")
    krbd = []
    for device in Path("/sys/bus/rbd/devices").glob("*"):
        with contextlib.suppress(OSError):
            if (device / "pool").read_text().strip() == pool and (device / "name").read_text().strip() == name:
                krbd.append({"device": f"/dev/rbd{device.name}", "snap": (device / "current_snap").read_text().strip()})
    nbd = []
    if shutil.which("rbd-nbd"):
        out = subprocess.run(["rbd-nbd", "list-mapped", "--format", "json"], capture_output=True, text=True)
        with contextlib.suppress(ValueError):
            nbd = [
                {"device": m["device"], "snap": m.get("snap") or "-"}
                for m in json.loads(out.stdout or "[]")
                if m.get("pool") == pool and m.get("image") == name
            ]
    return {"krbd": sorted(krbd, key=lambda m: m["device"]), "nbd": sorted(nbd, key=lambda m: m["device"])}


# --- what the kernel and the host offer -----------------------------------------------------------


def _load_modules(names: list[str]) -> None:
    """Ask for kernel modules a backend can use; a host without them (or without modprobe) says no later."""
    modprobe = shutil.which("modprobe") or next(
        (p for p in ("/usr/sbin/modprobe", "/sbin/modprobe") if os.access(p, os.X_OK)), None
    )
    if not modprobe:
        return
    for name in names:
        subprocess.run([modprobe, "-q", name], capture_output=True)


def kernel(modules: list[str]) -> dict[str, Any]:
    _load_modules(modules)
    try:
        filesystems = sorted(
            {line.split()[-1] for line in Path("/proc/filesystems").read_text().splitlines() if line.strip()}
        )
    except OSError:
        filesystems = []
    nbd = any(Path("/dev").glob("nbd[0-9]*"))
    return {
        "release": platform.release(),
        "filesystems": filesystems,
        "krbd": Path("/sys/bus/rbd").is_dir(),
        "nbd": nbd,
        "fuse": os.path.exists("/dev/fuse"),
        "ceph": "ceph" in filesystems,
        "nfs": "nfs" in filesystems or "nfs4" in filesystems,
    }


def tools(names: list[str]) -> dict[str, bool]:
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
    return {name: shutil.which(name, path=search) is not None for name in names}


def probe(
    target: str, state_dir: str, name: str | None, rbd: str | None, modules: list[str], want_tools: list[str]
) -> dict[str, Any]:
    mount = mounted_at(target)
    found = record_for(mount)
    ours = bool(found and name and found.get("backend") == name)
    held: dict[str, Any] = {
        "mounts": mounts_below(state_dir),
        "loops": loops(state_dir),
        "processes": processes(state_dir),
        "krbd": [],
        "nbd": [],
    }
    if rbd:
        held.update(rbd_mappings(rbd))
    # A mount point in use exists: no stat, which would wait for ever on storage that is gone (teardown probes).
    return {
        "uid": os.geteuid(),
        "hostname": platform.node(),
        "exists": mount is not None or os.path.isdir(target),
        "mounted": mount,
        "record": found,
        "ours": ours,
        "kept": bool(ours and found and found.get("kept")),
        "held": held,
        "holds_anything": any(held.values()),
        "state_dir_exists": os.path.isdir(state_dir),
        "kernel": kernel(modules),
        "tools": tools(want_tools),
    }


# --- acting -----------------------------------------------------------------------------------------


def check_readonly(target: str) -> tuple[bool, str]:
    """(True, the error) when a write below `target` fails as it should on a read-only mount."""
    path = Path(target) / f".iolab-write-check-{os.getpid()}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return True, os.strerror(exc.errno)
        return False, f"writing {path} failed with {os.strerror(exc.errno or 0)}, not with a read-only error"
    os.close(fd)
    path.unlink()
    return False, f"{target} accepted a write (created and removed {path.name}): it is not read-only"


def stop(state_dir: str, timeout: float) -> dict[str, Any]:
    """End the processes that name `state_dir` (SIGTERM, then SIGKILL), then unmount what is left below it."""
    pids = [p["pid"] for p in processes(state_dir)]
    killed, _ = terminate(pids, grace=timeout)
    done: dict[str, Any] = {"stopped": pids, "killed": killed, "unmounted": []}
    # A daemon killed outright leaves its FUSE mount behind, its connection gone.
    for mount in mounts_below(state_dir):
        out = subprocess.run(["umount", mount["target"]], capture_output=True, text=True)
        if out.returncode != 0:
            subprocess.run(["umount", "-l", mount["target"]], capture_output=True, text=True)
        done["unmounted"].append(mount["target"])
    done["left"] = [p["pid"] for p in processes(state_dir)]
    return done


def state_dir(path: str, keyring: str | None, name: str | None, files: list[str]) -> dict[str, Any]:
    """Create a backend's state directory (root only), with the client's bare key and empty files in it.

    The key goes from the keyring to DIR/key without passing through Ansible (QEMU's
    secret object and the kernel's secretfile= read a bare key).
    """
    directory = Path(path)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    made = []
    if keyring:
        out = subprocess.run(
            ["ceph-authtool", keyring, "--print-key", "--name", name or "client.admin"], capture_output=True, text=True
        )
        if out.returncode != 0:
            raise SystemExit(
                f"cannot read the key of {name} from {keyring}: "
                f"{(out.stderr.strip().splitlines() or ['no message'])[-1]}"
            )
        fd = os.open(directory / "key", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(out.stdout.strip())
        made.append("key")
    for name_ in files:
        target = directory / name_
        if not target.exists():
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o600))
            made.append(name_)
    return {"dir": str(directory), "made": made}


# --- what a data set image holds --------------------------------------------------------------------

MANIFEST_NAME = "manifest.jsonl"


def build_manifest(root: Path) -> bytes:
    """A manifest (iolab.host.dataset's format) of every file below `root`, for a source that has none."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if rel == MANIFEST_NAME or path.is_symlink() or not path.is_file():
                continue
            entries.append({"label": 0, "path": rel, "sha256": sha256_file(path), "size": path.stat().st_size})
    header = {
        "classes": 1,
        "files": len(entries),
        "generator": "iolab.host.mounts/1",
        "kind": "iolab.manifest/1",
        "seed": None,
    }
    lines = [json.dumps(line, sort_keys=True, separators=(",", ":")) for line in [header, *entries]]
    return "".join(line + "\n" for line in lines).encode()


def manifest_hash(root: Path) -> str:
    """sha256 of the source's manifest.jsonl, or of the one `build_manifest` would write."""
    manifest = root / MANIFEST_NAME
    if manifest.is_file():
        return sha256_file(manifest)
    return hashlib.sha256(build_manifest(root)).hexdigest()


def content_key(source: str | None, extra: dict[str, Any]) -> dict[str, Any]:
    """What decides a snapshot's content: the source's manifest and the rest of the layout."""
    identity = dict(extra)
    if source:
        identity["source_manifest"] = manifest_hash(Path(source))
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return {"key": key, **identity}
