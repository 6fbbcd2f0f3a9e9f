"""iolab's userspace NFS client: an NFS export as a FUSE file system, for hosts whose kernel has no NFS client.

    python -m iolab.host.storage.nfs_fuse mount URL MOUNTPOINT --state-dir DIR [--readonly]

The NFS side is nfs-rs (PyPI, a maintained userspace NFSv3/v4.1 client written in Rust), the FUSE side mfusepy
(the maintained successor of fusepy, over the system's libfuse). `mount` starts the file system's process in a
session of its own, waits until the mount point is a FUSE mount (or the process has ended, its one-line reason
printed) and returns. The process names its log, DIR/nfs-fuse.log, in its arguments: unmounting (`umount`) ends
it, and `iolab.host.mounts stop --state-dir DIR` finds it to wait for it (or kill one that hangs). The process
holds no data cache of its own: every read is a READ to the server, and the kernel's page cache over the mount is
dropped with the host's (`echo 3 > drop_caches`); docs/LAB_PITFALLS.md says what was measured.
"""

from __future__ import annotations

import argparse
import errno
import itertools
import os
import stat
import subprocess
import sys
import threading
import time
from typing import Any

FSNAME = "iolab-nfs"
SUBTYPE = "nfs-rs"
CLIENT = "nfs-rs (FUSE)"  # what a sample's provenance names as the client (the mount's record, `method`)
START_TIMEOUT_S = 30.0
_KIND = {"file": stat.S_IFREG, "directory": stat.S_IFDIR, "symlink": stat.S_IFLNK}


def _errno(exc: BaseException) -> int:
    """The errno of an nfs-rs error; EIO for one without (a timeout, the server gone)."""
    code = getattr(exc, "errno", None)
    return code if isinstance(code, int) and code > 0 else errno.EIO


class NfsFs:
    """The FUSE operations over one nfs-rs client; open files are nfs-rs File objects behind integer handles."""

    use_ns = True

    def __init__(self, client: Any) -> None:
        self._client = client
        self._files: dict[int, Any] = {}
        self._handles = itertools.count(1)
        self._lock = threading.Lock()

    def __getattribute__(self, name: str) -> Any:
        """Every operation's NFS error becomes the errno FUSE returns (mfusepy's FuseOSError)."""
        value = object.__getattribute__(self, name)
        if name.startswith("_") or not callable(value) or name not in _OPS:
            return value

        def call(*args: Any) -> Any:
            from mfusepy import FuseOSError

            try:
                return value(*args)
            except FuseOSError:
                raise
            except Exception as exc:  # nfs-rs's errors, whatever their class
                raise FuseOSError(_errno(exc)) from exc

        return call

    def _keep(self, handle: Any) -> int:
        with self._lock:
            fh = next(self._handles)
            self._files[fh] = handle
        return fh

    def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
        info = self._client.stat(_rel(path))
        kind = _KIND.get(getattr(info.type, "value", str(info.type)), stat.S_IFREG)
        return {
            "st_mode": kind | (info.mode & 0o7777),
            "st_nlink": info.nlink,
            "st_uid": info.uid,
            "st_gid": info.gid,
            "st_size": info.size,
            "st_blocks": (info.used + 511) // 512,
            "st_atime": info.atime,
            "st_mtime": info.mtime,
            "st_ctime": info.ctime,
            "st_ino": info.fileid,
        }

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *self._client.listdir(_rel(path))]

    def open(self, path: str, flags: int) -> int:
        writes = flags & os.O_ACCMODE != os.O_RDONLY
        handle = self._client.open(_rel(path), "r+b" if writes else "rb")
        if flags & os.O_TRUNC and writes:
            handle.truncate(0)
        return self._keep(handle)

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        handle = self._client.open(_rel(path), "w+b")
        self._client.chmod(_rel(path), mode & 0o7777)
        return self._keep(handle)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return self._files[fh].read_at(offset, size)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        return self._files[fh].write_at(data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        self._client.truncate(_rel(path), length)
        return 0

    def release(self, path: str, fh: int) -> int:
        with self._lock:
            handle = self._files.pop(fh, None)
        if handle is not None:
            handle.close()
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0  # nfs-rs's writes are durable when they return

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        self._client.mkdir(_rel(path))
        self._client.chmod(_rel(path), mode & 0o7777)
        return 0

    def unlink(self, path: str) -> int:
        self._client.unlink(_rel(path))
        return 0

    def rmdir(self, path: str) -> int:
        self._client.rmdir(_rel(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        self._client.rename(_rel(old), _rel(new))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        self._client.chmod(_rel(path), mode & 0o7777)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        now = time.time_ns()
        self._client.utime(_rel(path), ns=times or (now, now))
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        fs = self._client.fs_stat()
        block = 4096
        return {
            "f_bsize": block,
            "f_frsize": block,
            "f_blocks": fs.total_bytes // block,
            "f_bfree": fs.free_bytes // block,
            "f_bavail": fs.available_bytes // block,
            "f_files": fs.total_files,
            "f_ffree": fs.free_files,
            "f_favail": fs.available_files,
            "f_namemax": 255,
        }


_OPS = {name for name in vars(NfsFs) if not name.startswith("_") and callable(vars(NfsFs)[name])}


def _rel(path: str) -> str:
    """nfs-rs's paths are relative to the export; FUSE's start with '/' ('' for the export's root)."""
    return path.lstrip("/")


def serve(url: str, mountpoint: str, log: str, readonly: bool) -> int:
    """Connect, then serve the export at `mountpoint` until it is unmounted (the process's own life), its messages
    in `log`."""
    from mfusepy import FUSE
    from nfs_rs import Client

    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    try:
        client = Client.connect(url, connect_timeout=10, operation_timeout=30)
    except Exception as exc:  # the one line the mount's caller prints
        print(f"nfs-rs could not reach {url}: {exc}", file=sys.stderr, flush=True)
        return 1
    options = {"fsname": FSNAME, "subtype": SUBTYPE, "allow_other": True, "default_permissions": True}
    try:
        FUSE(NfsFs(client), mountpoint, foreground=True, ro=readonly, **options)
    finally:
        client.close()
    return 0


def _fuse_mounted(mountpoint: str) -> bool:
    from iolab.host.mounts import mounted_at

    found = mounted_at(mountpoint) or {}
    return found.get("source") == FSNAME


def mount(url: str, mountpoint: str, state_dir: str, readonly: bool) -> int:
    """Start the file system's process and wait until the export is mounted, or say in one line why not."""
    log = os.path.join(state_dir, "nfs-fuse.log")
    argv = [sys.executable, "-m", "iolab.host.storage.nfs_fuse", "serve", url, mountpoint, "--log", log]
    proc = subprocess.Popen(
        argv + (["--readonly"] if readonly else []),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if _fuse_mounted(mountpoint):
            return 0
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    with open(log, errors="replace") as f:
        last = [line.strip() for line in f if line.strip()][-1:] or [f"no mount in {START_TIMEOUT_S:.0f} s"]
    print(f"the NFS FUSE client did not mount {mountpoint}: {last[0]}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iolab.host.storage.nfs_fuse", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("mount", "serve"):
        p = sub.add_parser(name)
        p.add_argument("url")
        p.add_argument("mountpoint")
        p.add_argument("--readonly", action="store_true")
        p.add_argument("--state-dir" if name == "mount" else "--log", required=True)
    opts = parser.parse_args(argv)
    if opts.command == "serve":
        return serve(opts.url, opts.mountpoint, opts.log, opts.readonly)
    return mount(opts.url, opts.mountpoint, opts.state_dir, opts.readonly)


if __name__ == "__main__":
    sys.exit(main())
