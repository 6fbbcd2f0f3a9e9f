"""Where iolab may mount and write on a host: its own mount root, never a system directory (stdlib only).

The controller checks a campaign's mount points and directories with `refusal` before
anything runs; the host checks them again (`iolab.host.mounts.target_refusal`, a storage call's --check-target) on the
path it is about to mount, where it can also see whether a directory is empty.

>>> refusal("/etc", "path", existing=True)
'path /etc belongs to the system (/etc); use a directory of your own'
>>> refusal("/mnt/iolab/fast", "mountpoint") is None
True
"""

from __future__ import annotations

import os
import posixpath

MOUNT_ROOT = "/mnt/iolab"
# Mounting over one of these, or writing benchmark files into it, harms the host.
SYSTEM_DIRS = frozenset(
    {
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/home",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/media",
        "/mnt",
        "/opt",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/srv",
        "/sys",
        "/tmp",
        "/usr",
        "/var",
        "/usr/local",
        "/var/lib",
        "/var/log",
        "/var/cache",
        "/var/spool",
        "/var/tmp",
        "/var/run",
        "/run/iolab",
        "/opt/iolab",
    }
)
# Nothing below these is a place for a mount or a benchmark's files.
SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/opt/iolab",
    "/var/lib",
)


def inside(path: str, tree: str) -> bool:
    """Whether `path` is `tree` or below it (both normalised absolute paths)."""
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def refusal(path: str, what: str, mount_root: str = MOUNT_ROOT, existing: bool = False) -> str | None:
    """Why `path` is refused, or None.

    A mount point may be no system directory; a directory that already holds data
    (`existing`: a local backend, where benchmarks write only into their own
    iolab-<host> subdirectory) may be any but the root and the system's own trees.
    """
    path = posixpath.normpath(path)
    tree = next((t for t in SYSTEM_TREES if inside(path, t)), None)
    if tree and not inside(path, mount_root):
        return f"{what} {path} belongs to the system ({tree}); use a directory of your own" + (
            "" if existing else f", or leave mountpoint out ({mount_root}/<backend>)"
        )
    if path == "/" or (path in SYSTEM_DIRS and not existing):
        return f"{what} {path} is a system directory; " + (
            "use a directory of your own (a data disk's, or /var/tmp)"
            if existing
            else f"mount under {mount_root} (the default) or name an empty directory of your own"
        )
    return None


def host_refusal(path: str, mount_root: str, existing: bool, ours: bool) -> str | None:
    """The host's own check of `path` before a storage role uses it.

    `existing`: a directory that already holds data (a local backend): only the system
    rules apply. Otherwise a mount point outside the mount root must be missing or an
    empty directory, unless `ours` (iolab's own mount is there already).
    """
    what = "the directory" if existing else "mount point"
    reason = refusal(path, what, mount_root, existing) or refusal(
        os.path.realpath(path), f"{what} {path}, resolved,", mount_root, existing
    )
    if reason or existing or ours or inside(posixpath.normpath(path), mount_root):
        return reason
    if os.path.islink(path):
        return f"mount point {path} is a symbolic link; name the directory itself"
    if os.path.isdir(path) and any(os.scandir(path)):
        return (
            f"mount point {path} is a directory that holds files, which a mount would hide; name an empty "
            f"directory or leave mountpoint out (then {mount_root}/<backend> is used)"
        )
    if os.path.exists(path) and not os.path.isdir(path):
        return f"mount point {path} exists and is not a directory; name an empty directory"
    return None
