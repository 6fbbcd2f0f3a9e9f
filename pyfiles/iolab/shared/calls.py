"""The argvs of host-side programs that both routes build, the fan-out's steps (iolab.drive.steps) and the roles
(through roles/bench_fio/filter_plugins/iolab_hostcall.py), in one place each (stdlib only: an Ansible task that
templates one imports nothing more):

    tmpfs(python, host, variables, stop_dir)          → storage.tmpfs: a tmpfs mounted, or unmounted
    local(python, host, variables, stop_dir)          → storage.localdir: a local directory checked, or cleared
    rbd(python, host, variables, stop_dir)            → storage.localdir --make: an rbd backend's work directory, or
                                                        cleared
    rbd_image(python, host, variables)                → storage.rbdimage: an rbd backend's image ready (on one host)
    rbd_snapshot(python, host, variables, stop_dir)   → storage.rbdsnapshot: a snapshot mapped and mounted, or taken
                                                        away
    rbd_snapshot_image(python, host, variables)       → storage.rbdsnapshot image: the snapshot made (on one host)
    cephfs(python, host, variables, stop_dir)         → storage.cephfs: a CephFS backend mounted, or unmounted
    sshfs(python, host, variables, stop_dir)          → storage.sshfs: another host's directory mounted over SSH
    nfs(python, host, variables, stop_dir)            → storage.nfs: an NFS backend mounted, or unmounted
    fsmount(python, host, variables, stop_dir)        → storage.fsmount: a generic mount backend mounted, or unmounted
    s3(python, host, variables, stop_dir)             → storage.s3state: an s3 backend checked (its data set staged),
                                                        or this host's keys removed
    dataset(python, host, variables)                  → dataset ensure: the campaign's data set on the host

(each a module of iolab.host, run as `python -m iolab.host.<module>`). The roles reach them by name, ARGVS's.
"""

from __future__ import annotations

import json
from typing import Any

ARGVS = (
    "tmpfs",
    "local",
    "rbd",
    "rbd_image",
    "rbd_snapshot",
    "rbd_snapshot_image",
    "cephfs",
    "sshfs",
    "nfs",
    "fsmount",
    "s3",
    "dataset",
)


def tmpfs(python: str, host: str, variables: dict[str, Any], stop_dir: str | None = None) -> list[str]:
    """The one host-side call (iolab.host.storage.tmpfs) that mounts or unmounts a tmpfs backend on `host`: the argv of
    both routes, roles/storage_tmpfs's task (through its filter plugin) and the fan-out's steps (iolab.drive.steps).
    `variables`: the storage phase's (iolab.drive.execute.storage_phase: storage_tmpfs_state, _name, _mountpoint,
    _size; storage_target, storage_mount_root, storage_existing, storage_stop_tools); `stop_dir`: this command's runs
    directory on the host, ended and removed first on an unmount (or whenever its tools are to be stopped)."""
    own = ["--mountpoint", str(variables["storage_tmpfs_mountpoint"])]
    own += ["--size", str(int(variables.get("storage_tmpfs_size", 0)))]
    return _storage("tmpfs", "iolab.host.storage.tmpfs", python, host, variables, stop_dir, own)


def local(python: str, host: str, variables: dict[str, Any], stop_dir: str | None = None) -> list[str]:
    """The one host-side call (iolab.host.storage.localdir) that checks a local backend's directory, or removes iolab's
    files from it, on `host`: the argv of both routes, roles/storage_local's task and the fan-out's steps, as tmpfs's
    (`variables`: storage_local_state, _name, _path and storage.yml's)."""
    own = ["--path", str(variables["storage_local_path"])]
    return _storage("local", "iolab.host.storage.localdir", python, host, variables, stop_dir, own)


def rbd(python: str, host: str, variables: dict[str, Any], stop_dir: str | None = None) -> list[str]:
    """The one host-side call (iolab.host.storage.localdir --make) that makes an rbd backend's work directory on `host`,
    or removes iolab's files from it: the argv of both routes, roles/storage_rbd's second task and the fan-out's steps
    (`variables`: storage_rbd_state, _name, _mountpoint and storage.yml's). The image is rbd_image's, on one host."""
    own = ["--path", str(variables["storage_rbd_mountpoint"])]
    own += ["--make"] if variables["storage_rbd_state"] in ("mounted", "kept") else []
    return _storage("rbd", "iolab.host.storage.localdir", python, host, variables, stop_dir, own)


def rbd_image(python: str, host: str, variables: dict[str, Any]) -> list[str]:
    """The call (iolab.host.storage.rbdimage) that makes an rbd backend's image ready, once, on the first host: created,
    as large as the backend, written whole once. The argv of both routes, roles/storage_rbd's first task (run_once) and
    the fan-out's steps (`variables`: the storage phase's storage_rbd_*)."""
    own = ["--name", str(variables["storage_rbd_name"]), "--host", host]
    own += ["--pool", str(variables["storage_rbd_pool"]), "--image", str(variables["storage_rbd_image"])]
    own += ["--size", str(int(variables["storage_rbd_size"]))]
    own += ["--prefill"] if variables["storage_rbd_prefill"] else []
    own += ["--conf", str(variables["storage_rbd_ceph_conf"]), "--keyring", str(variables["storage_rbd_keyring"])]
    own += ["--client", str(variables["storage_rbd_client"])]
    own += ["--connect-timeout", str(int(variables.get("storage_rbd_connect_timeout", 15)))]
    return [python, "-m", "iolab.host.storage.rbdimage", *own]


def rbd_snapshot(python: str, host: str, variables: dict[str, Any], stop_dir: str | None = None) -> list[str]:
    """The host-side call (iolab.host.storage.rbdsnapshot) that maps and mounts an rbd_snapshot backend on `host`, or
    takes it away: the argv of both routes, roles/storage_rbd_snapshot's second task and the fan-out's steps
    (`variables`: the storage phase's storage_rbd_snapshot_* (the backend's fields, the role's timeouts) and
    storage.yml's, and storage_hosts: how many hosts map it at once). The snapshot is rbd_snapshot_image's, made on one
    host."""
    own = _rbd_snapshot(host, variables)
    if variables["storage_rbd_snapshot_state"] in ("mounted", "kept"):
        own += ["--method", str(variables["storage_rbd_snapshot_method"])]
        own += ["--hosts", str(int(variables.get("storage_hosts", 1)))]
        own += [f"--option={option}" for option in variables.get("storage_rbd_snapshot_options") or ()]
    else:
        own += ["--unmount-wait", str(variables.get("storage_unmount_wait", 20))]
    return _storage("rbd_snapshot", "iolab.host.storage.rbdsnapshot", python, host, variables, stop_dir, own)


def rbd_snapshot_image(python: str, host: str, variables: dict[str, Any]) -> list[str]:
    """The call (iolab.host.storage.rbdsnapshot image) that makes an rbd_snapshot backend's snapshot (or its scratch
    image) ready, once, on the first host: the argv of both routes, roles/storage_rbd_snapshot's first task (run_once)
    and the fan-out's steps (`variables`: rbd_snapshot's, and storage_rbd_snapshot_hosts: the inventory's hosts, whose
    directories a new snapshot links to its root)."""
    own = _rbd_snapshot(host, variables)
    own += ["--size", str(int(variables["storage_rbd_snapshot_size"]))]
    own += ["--method", str(variables["storage_rbd_snapshot_method"])]
    if variables.get("storage_rbd_snapshot_source"):
        own += ["--source", str(variables["storage_rbd_snapshot_source"])]
    if variables.get("storage_rbd_snapshot_dataset"):
        own += ["--dataset", json.dumps(variables["storage_rbd_snapshot_dataset"], sort_keys=True)]
    own += ["--fio-size", str(int(variables.get("storage_rbd_snapshot_fio_size") or 0))]
    own += [f"--link={linked}" for linked in variables.get("storage_rbd_snapshot_hosts") or ()]
    name = str(variables["storage_rbd_snapshot_name"])
    return [python, "-m", "iolab.host.storage.rbdsnapshot", "image", "--name", name, "--host", host, *own]


def _rbd_snapshot(host: str, variables: dict[str, Any]) -> list[str]:
    """What both rbd_snapshot calls name: where it is mounted and kept on the host, the image, the cluster."""
    own = _where("rbd_snapshot", host, variables)
    own += ["--pool", str(variables["storage_rbd_snapshot_pool"])]
    own += ["--image", str(variables["storage_rbd_snapshot_image"])]
    own += ["--snapshot", str(variables["storage_rbd_snapshot_snapshot"])]
    own += ["--scratch"] if variables.get("storage_rbd_snapshot_scratch") else []
    own += ["--conf", str(variables["storage_rbd_snapshot_ceph_conf"])]
    own += ["--keyring", str(variables["storage_rbd_snapshot_keyring"])]
    own += ["--client", str(variables["storage_rbd_snapshot_client"])]
    own += ["--connect-timeout", str(int(variables.get("storage_rbd_snapshot_connect_timeout", 15)))]
    return own + ["--stop-timeout", str(variables.get("storage_rbd_snapshot_stop_timeout", 30))]


def cephfs(python: str, host: str, variables: dict[str, Any], stop_dir: str | None = None) -> list[str]:
    """The one host-side call (iolab.host.storage.cephfs) that mounts or unmounts a CephFS backend on `host`: the argv
    of both routes, roles/storage_cephfs's task and the fan-out's steps (`variables`: the storage phase's
    storage_cephfs_* (the backend's fields, the role's stop timeout) and storage.yml's; the role's own state directory
    where it has one, else its default, and the unmount's wait where the inventory sets one)."""
    own = _where("cephfs", host, variables)
    if variables["storage_cephfs_state"] in ("mounted", "kept"):
        own += [
            "--conf",
            str(variables["storage_cephfs_ceph_conf"]),
            "--keyring",
            str(variables["storage_cephfs_keyring"]),
        ]
        own += ["--client", str(variables["storage_cephfs_client"]), "--fs", str(variables["storage_cephfs_fs_name"])]
        own += ["--path", str(variables["storage_cephfs_path"]), "--method", str(variables["storage_cephfs_method"])]
        own += ["--readonly"] if variables.get("storage_cephfs_readonly") else []
        own += [f"--option={option}" for option in variables.get("storage_cephfs_options") or ()]
    else:
        own += ["--stop-timeout", str(variables["storage_cephfs_stop_timeout"])]
        own += ["--unmount-wait", str(variables.get("storage_unmount_wait", 20))]
    return _storage("cephfs", "iolab.host.storage.cephfs", python, host, variables, stop_dir, own)


def sshfs(python: str, host: str, variables: dict[str, Any], stop_dir: str | None = None) -> list[str]:
    """The one host-side call (iolab.host.storage.sshfs) that mounts or unmounts an sshfs backend on `host`: the argv of
    both routes, roles/storage_sshfs's task and the fan-out's steps (`variables`: the storage phase's storage_sshfs_*
    and storage.yml's, and storage_sshfs_server: how the inventory reaches the serving host (ansible_host, _user, _port,
    _ssh_private_key_file), None where it is not in the inventory). Its key goes on the call's stdin, never here."""
    own = _where("sshfs", host, variables)
    if variables["storage_sshfs_state"] in ("mounted", "kept"):
        serving = str(variables["storage_sshfs_host"])
        own += ["--server", serving, "--path", str(variables["storage_sshfs_path"])]
        if (server := variables.get("storage_sshfs_server")) is not None:
            own += ["--address", str(server.get("ansible_host") or serving)]
            own += ["--user", str(server.get("ansible_user") or "root")]
            own += ["--port", str(int(server.get("ansible_port") or 22))]
            own += ["--key-on-stdin"] if server.get("ansible_ssh_private_key_file") else []
        own += ["--readonly"] if variables.get("storage_sshfs_readonly") else []
        own += [f"--option={option}" for option in variables.get("storage_sshfs_options") or ()]
    else:
        own += ["--stop-timeout", str(variables.get("storage_sshfs_stop_timeout", 15))]
        own += ["--unmount-wait", str(variables.get("storage_unmount_wait", 20))]
    return _storage("sshfs", "iolab.host.storage.sshfs", python, host, variables, stop_dir, own)


def nfs(python: str, host: str, variables: dict[str, Any], stop_dir: str | None = None) -> list[str]:
    """The one host-side call (iolab.host.storage.nfs) that mounts or unmounts an NFS backend on `host`: the argv of
    both routes, roles/storage_nfs's task and the fan-out's steps (`variables`: the storage phase's storage_nfs_* (the
    backend's fields, the role's timeouts and the FUSE client's pins) and storage.yml's)."""
    own = _where("nfs", host, variables)
    if variables["storage_nfs_state"] in ("mounted", "kept"):
        own += ["--server", str(variables["storage_nfs_server"]), "--export", str(variables["storage_nfs_export"])]
        own += ["--version", str(variables["storage_nfs_version"]), "--method", str(variables["storage_nfs_method"])]
        own += ["--port", str(int(variables["storage_nfs_port"]))]
        own += ["--mount-port", str(int(variables["storage_nfs_mount_port"]))]
        own += ["--check-timeout", str(variables["storage_nfs_check_timeout"])]
        own += ["--readonly"] if variables.get("storage_nfs_readonly") else []
        own += [f"--option={option}" for option in variables.get("storage_nfs_options") or ()]
        own += [f"--fuse-package={spec}" for spec in variables["storage_nfs_fuse_packages"]]
    else:
        own += ["--stop-timeout", str(variables["storage_nfs_stop_timeout"])]
        own += ["--unmount-wait", str(variables.get("storage_unmount_wait", 20))]
    return _storage("nfs", "iolab.host.storage.nfs", python, host, variables, stop_dir, own)


def fsmount(python: str, host: str, variables: dict[str, Any], stop_dir: str | None = None) -> list[str]:
    """The one host-side call (iolab.host.storage.fsmount) that mounts or unmounts a generic mount backend on `host`:
    the argv of both routes, roles/storage_mount's task and the fan-out's steps (`variables`: the storage phase's
    storage_mount_* (the backend's fields, its local source) and storage.yml's)."""
    own = _where("mount", host, variables)
    if variables["storage_mount_state"] in ("mounted", "kept"):
        own += ["--source", str(variables["storage_mount_source"]), "--fstype", str(variables["storage_mount_fstype"])]
        own += ["--local-source", str(variables.get("storage_mount_local_source") or "")]
        own += ["--readonly"] if variables.get("storage_mount_readonly") else []
        own += [f"--option={option}" for option in variables.get("storage_mount_options") or ()]
    else:
        own += ["--unmount-wait", str(variables.get("storage_unmount_wait", 20))]
    return _storage("mount", "iolab.host.storage.fsmount", python, host, variables, stop_dir, own)


def s3(python: str, host: str, variables: dict[str, Any], stop_dir: str | None = None) -> list[str]:
    """The one host-side call (iolab.host.storage.s3state) that checks an s3 backend on `host` (and makes the campaign's
    data set there, the first host uploading it: storage_first), or removes this host's keys from it: the argv of both
    routes, roles/storage_s3's task and the fan-out's steps (`variables`: the storage phase's storage_s3_* (the
    backend's fields, the data set's identity and its staging directory) and storage.yml's). The connection names
    where the keys are, never the keys."""
    fields = ("endpoint", "bucket", "prefix", "region", "credentials")
    connection = {field: variables[f"storage_s3_{field}"] for field in fields}
    own = ["--s3", json.dumps(connection, sort_keys=True)]
    own += ["--readonly"] if variables.get("storage_s3_readonly") else []
    identity = variables.get("storage_s3_dataset")
    if variables["storage_s3_state"] == "mounted" and identity:
        own += ["--stage"] if variables.get("storage_first") else []
        staged = {f"dataset_gen_{key}": identity[key] for key in ("files", "seed", "classes", "kind")}
        staged |= {"dataset_gen_formats": [], "dataset_gen_replace": True}
        staged["dataset_gen_root"] = f"{variables['storage_s3_staging']}/iolab-{host}/dataset"
        own += ["--ensure", *dataset(python, host, staged)[4:]]  # (the rest of its line: `--ensure` takes it all)
    return _storage("s3", "iolab.host.storage.s3state", python, host, variables, stop_dir, own)


def _where(kind: str, host: str, variables: dict[str, Any]) -> list[str]:
    """A mounting backend's --mountpoint and --state-dir: the role's own state directory where it sets one, else the
    backend's directory below /run/iolab/storage/HOST."""
    name = str(variables[f"storage_{kind}_name"])
    state_dir = variables.get(f"storage_{kind}_state_dir") or f"/run/iolab/storage/{host}/{name}"
    return ["--mountpoint", str(variables[f"storage_{kind}_mountpoint"]), "--state-dir", str(state_dir)]


def _storage(
    kind: str, module: str, python: str, host: str, variables: dict[str, Any], stop_dir: str | None, own: list[str]
) -> list[str]:
    """A backend's one call, `python -m module` (storage_<kind>'s state and name, the kind's `own` arguments):
    storage.yml's check of the target where it is put in place, and its stop of this command's tools where it is
    taken away."""
    state = str(variables[f"storage_{kind}_state"])
    stop_tools = bool(variables.get("storage_stop_tools", False))
    argv = [python, "-m", module, state, "--name", str(variables[f"storage_{kind}_name"]), "--host", host]
    target = variables.get("storage_target")
    if target is not None and state in ("mounted", "kept"):
        argv += ["--check-target", str(target), "--root", str(variables.get("storage_mount_root", ""))]
        argv += ["--existing"] if variables.get("storage_existing") else []
    if stop_dir is not None and (stop_tools or state == "unmounted"):
        argv += ["--stop-dir", stop_dir] + ([] if stop_tools else ["--keep-archives"])
    return argv + own  # the kind's own last (iolab.host.storage.s3state's --ensure takes the rest of the line)


def dataset_root(host: str, variables: dict[str, Any]) -> str:
    """Where `host`'s data set goes: dataset_gen_root (per host: its <root>/<host>), else the storage under test's
    <dataset_gen_target>/iolab-<host>/dataset (hosts may share a file system and must not generate into one
    directory)."""
    root, target = str(variables.get("dataset_gen_root") or ""), str(variables.get("dataset_gen_target") or "")
    if root:
        return f"{root}/{host}" if variables.get("dataset_gen_per_host") else root
    if not target:
        raise ValueError("give dataset_gen_target (the storage under test) or dataset_gen_root (an exact directory)")
    return f"{target}/iolab-{host}/dataset"


def dataset(python: str, host: str, variables: dict[str, Any]) -> list[str]:
    """The one host-side call (iolab.host.dataset ensure) that puts the campaign's data set on `host`: the argv of
    both routes, roles/dataset_gen's task (through its filter plugin) and the fan-out's steps (iolab.drive.steps).
    `variables`: the dataset phase's (iolab.drive.datasets.phase) or the role's (its defaults filled in): where
    (dataset_gen_target or _root, _per_host), what (_files, _seed, _classes, _kind, _formats), and optionally
    _workers (0: every usable CPU) and _replace."""
    value = {key: variables[f"dataset_gen_{key}"] for key in ("files", "seed", "classes", "kind", "formats")}
    workers = int(variables.get("dataset_gen_workers") or 0)
    argv = [python, "-m", "iolab.host.dataset", "ensure", dataset_root(host, variables), "--host", host]
    argv += ["--files", str(value["files"]), "--seed", str(value["seed"]), "--classes", str(value["classes"])]
    argv += ["--kind", str(value["kind"]), "--formats", ",".join(value["formats"])]
    argv += ["--workers", str(workers)] if workers > 0 else []
    return argv + (["--replace"] if variables.get("dataset_gen_replace") else [])
