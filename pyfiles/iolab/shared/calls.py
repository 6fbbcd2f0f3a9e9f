"""The argvs of host-side programs that both routes build, the fan-out's steps (iolab.drive.steps) and the roles
(through roles/bench_fio/filter_plugins/iolab_hostcall.py), in one place each (stdlib only: an Ansible task that
templates one imports nothing more):

    tmpfs(python, host, variables, stop_dir)  → iolab.host.tmpfs's mount or unmount
"""

from __future__ import annotations

from typing import Any


def tmpfs(
    python: str,
    host: str,
    variables: dict[str, Any],
    stop_dir: str | None = None,
) -> list[str]:
    """The one host-side call (iolab.host.tmpfs) that mounts or unmounts a tmpfs backend on `host`: the argv of both
    routes, roles/storage_tmpfs's task (through its filter plugin) and the fan-out's steps (iolab.drive.steps).
    `variables`: the storage phase's (iolab.drive.execute.storage_phase: storage_tmpfs_state, _name, _mountpoint,
    _size; storage_target, storage_mount_root, storage_existing, storage_stop_tools); `stop_dir`: this command's runs
    directory on the host, ended and removed first on an unmount (or whenever its tools are to be stopped)."""
    state = str(variables["storage_tmpfs_state"])
    stop_tools = bool(variables.get("storage_stop_tools", False))
    argv = [python, "-m", "iolab.host.tmpfs", state, "--name", str(variables["storage_tmpfs_name"])]
    argv += ["--mountpoint", str(variables["storage_tmpfs_mountpoint"]), "--host", host]
    argv += ["--size", str(int(variables.get("storage_tmpfs_size", 0)))]
    target = variables.get("storage_target")
    if target is not None and state in ("mounted", "kept"):
        argv += ["--check-target", str(target), "--root", str(variables.get("storage_mount_root", ""))]
        argv += ["--existing"] if variables.get("storage_existing") else []
    if stop_dir is not None and (stop_tools or state == "unmounted"):
        argv += ["--stop-dir", stop_dir] + ([] if stop_tools else ["--keep-archives"])
    return argv
