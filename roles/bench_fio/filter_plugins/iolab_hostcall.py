"""The host-side calls both routes build, in one place each: the bench roles' (iolab.workloads.hostcall), the tmpfs
backend's mount and unmount, the local backend's check and clearing, the rbd backend's image and work directory, the
CephFS, NFS and generic mount backends' mount and unmount, the s3 backend's state, and the campaign's data set
(iolab.shared.calls). The loader roles', the storage roles' (but storage_sshfs's and storage_rbd_snapshot's) and
dataset_gen's filter_plugins are links to this directory. Each filter imports what it needs when called: Ansible
templates a task in a worker of its own, which imports them again, and the storage roles' and dataset_gen's tasks
need no workload kind (iolab.workloads: ≈ 0.5 s here)."""

from __future__ import annotations

import dataclasses
from typing import Any


def iolab_host_call(
    variables: dict, role: str, python: str, host: str, run_dir: str, play: dict, drop: bool
) -> dict[str, Any]:
    """`variables` (the role's, without their prefix) | iolab_host_call(ROLE, PYTHON, HOST, RUN_DIR, PLAY, DROP):
    the host's call as a mapping (prepare, run, tool, env, prepare_task, run_task)."""
    from iolab.workloads.hostcall import host_call

    call = host_call(role, python, host, run_dir, dict(play), bool(drop), dict(variables))
    return dataclasses.asdict(call)


def iolab_play(hosts: list, run_id: str, hostvars: Any, dirs: Any = ()) -> dict[str, Any]:
    """`ansible_play_hosts` | iolab_play(RUN_ID, hostvars, DIRS): the run's play as a kind's host call takes it
    (iolab.workloads.base.Play.of): each host's address from its inventory variables, and its run directory (`dirs`,
    in the hosts' order) where an MPI job's first host names the others'."""
    from iolab.workloads.base import Play

    hosts = list(hosts)
    play = Play.of(hosts, str(run_id), {h: hostvars[h] for h in hosts}, dict(zip(hosts, list(dirs), strict=False)))
    return dataclasses.asdict(play)


def iolab_tmpfs_call(variables: dict, python: str, host: str, stop_dir: str | None) -> list[str]:
    """`variables` (the storage phase's) | iolab_tmpfs_call(PYTHON, HOST, STOP_DIR): the tmpfs's mount or unmount."""
    from iolab.shared.calls import tmpfs

    return tmpfs(python, host, dict(variables), stop_dir)


def iolab_local_call(variables: dict, python: str, host: str, stop_dir: str | None) -> list[str]:
    """`variables` (the storage phase's) | iolab_local_call(PYTHON, HOST, STOP_DIR): a local backend's directory
    checked, or iolab's files in it removed."""
    from iolab.shared.calls import local

    return local(python, host, dict(variables), stop_dir)


def iolab_rbd_call(variables: dict, python: str, host: str, stop_dir: str | None) -> list[str]:
    """`variables` (the storage phase's) | iolab_rbd_call(PYTHON, HOST, STOP_DIR): an rbd backend's work directory
    made on the host, or iolab's files in it removed."""
    from iolab.shared.calls import rbd

    return rbd(python, host, dict(variables), stop_dir)


def iolab_rbd_image_call(variables: dict, python: str, host: str) -> list[str]:
    """`variables` (the storage phase's) | iolab_rbd_image_call(PYTHON, HOST): an rbd backend's image made ready."""
    from iolab.shared.calls import rbd_image

    return rbd_image(python, host, dict(variables))


def iolab_rbd_snapshot_call(variables: dict, python: str, host: str, stop_dir: str | None) -> list[str]:
    """`variables` (the storage phase's) | iolab_rbd_snapshot_call(PYTHON, HOST, STOP_DIR): an rbd_snapshot backend
    mapped and mounted, or taken away."""
    from iolab.shared.calls import rbd_snapshot

    return rbd_snapshot(python, host, dict(variables), stop_dir)


def iolab_rbd_snapshot_image_call(variables: dict, python: str, host: str) -> list[str]:
    """`variables` (the storage phase's) | iolab_rbd_snapshot_image_call(PYTHON, HOST): the snapshot made, once."""
    from iolab.shared.calls import rbd_snapshot_image

    return rbd_snapshot_image(python, host, dict(variables))


def iolab_cephfs_call(variables: dict, python: str, host: str, stop_dir: str | None) -> list[str]:
    """`variables` (the storage phase's) | iolab_cephfs_call(PYTHON, HOST, STOP_DIR): a CephFS backend mounted, or
    unmounted."""
    from iolab.shared.calls import cephfs

    return cephfs(python, host, dict(variables), stop_dir)


def iolab_sshfs_call(variables: dict, python: str, host: str, stop_dir: str | None) -> list[str]:
    """`variables` (the storage phase's) | iolab_sshfs_call(PYTHON, HOST, STOP_DIR): an sshfs backend mounted, or
    unmounted."""
    from iolab.shared.calls import sshfs

    return sshfs(python, host, dict(variables), stop_dir)


def iolab_nfs_call(variables: dict, python: str, host: str, stop_dir: str | None) -> list[str]:
    """`variables` (the storage phase's) | iolab_nfs_call(PYTHON, HOST, STOP_DIR): an NFS backend mounted, or
    unmounted."""
    from iolab.shared.calls import nfs

    return nfs(python, host, dict(variables), stop_dir)


def iolab_fsmount_call(variables: dict, python: str, host: str, stop_dir: str | None) -> list[str]:
    """`variables` (the storage phase's) | iolab_fsmount_call(PYTHON, HOST, STOP_DIR): a generic mount backend
    mounted, or unmounted."""
    from iolab.shared.calls import fsmount

    return fsmount(python, host, dict(variables), stop_dir)


def iolab_s3_call(variables: dict, python: str, host: str, stop_dir: str | None) -> list[str]:
    """`variables` (the storage phase's) | iolab_s3_call(PYTHON, HOST, STOP_DIR): an s3 backend checked (its data set
    made, and uploaded from the first host), or this host's keys removed."""
    from iolab.shared.calls import s3

    return s3(python, host, dict(variables), stop_dir)


def iolab_dataset_call(variables: dict, python: str, host: str) -> list[str]:
    """`variables` (the dataset_gen role's) | iolab_dataset_call(PYTHON, HOST): the data set's one call on the host."""
    from iolab.shared.calls import dataset

    return dataset(python, host, dict(variables))


class FilterModule:
    def filters(self) -> dict:
        return {
            "iolab_host_call": iolab_host_call,
            "iolab_play": iolab_play,
            "iolab_tmpfs_call": iolab_tmpfs_call,
            "iolab_local_call": iolab_local_call,
            "iolab_rbd_call": iolab_rbd_call,
            "iolab_rbd_image_call": iolab_rbd_image_call,
            "iolab_rbd_snapshot_call": iolab_rbd_snapshot_call,
            "iolab_rbd_snapshot_image_call": iolab_rbd_snapshot_image_call,
            "iolab_cephfs_call": iolab_cephfs_call,
            "iolab_sshfs_call": iolab_sshfs_call,
            "iolab_nfs_call": iolab_nfs_call,
            "iolab_fsmount_call": iolab_fsmount_call,
            "iolab_s3_call": iolab_s3_call,
            "iolab_dataset_call": iolab_dataset_call,
        }
