"""The host-side calls both routes build, in one place each: the bench roles' (iolab.kinds.hostcall), and every
storage backend's state and the campaign's data set (iolab.shared.calls, through `iolab_call`). The loader roles',
the storage roles' and dataset_gen's filter_plugins are links to this directory. Each filter imports what it needs
when called: Ansible templates a task in a worker of its own, which imports them again, and the storage roles' and
dataset_gen's tasks need no workload kind (iolab.workloads: ≈ 0.5 s here)."""

from __future__ import annotations

import dataclasses
from typing import Any


def iolab_host_call(
    variables: dict, role: str, python: str, host: str, run_dir: str, play: dict, drop: bool
) -> dict[str, Any]:
    """`variables` (the role's, without their prefix) | iolab_host_call(ROLE, PYTHON, HOST, RUN_DIR, PLAY, DROP):
    the host's call as a mapping (prepare, run, tool, env, prepare_task, run_task)."""
    from iolab.kinds.hostcall import host_call

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


def iolab_call(variables: dict, name: str, python: str, host: str, *stop_dir: str | None) -> list[str]:
    """`variables` (the storage phase's, or dataset_gen's) | iolab_call(NAME, PYTHON, HOST[, STOP_DIR]): the argv of
    the function NAME of iolab.shared.calls (one of its ARGVS), the call the fan-out makes too: a backend's storage
    put in place or taken away (`stop_dir`: this command's run directory on the host, whose tools the teardown
    stops), a backend's one call on the first host (rbd_image, rbd_snapshot_image), the data set's."""
    from iolab.shared import calls

    call = getattr(calls, name, None) if name in calls.ARGVS else None
    if call is None:
        raise ValueError(f"iolab_call: no host call {name!r} (iolab.shared.calls has {', '.join(calls.ARGVS)})")
    return call(python, host, dict(variables), *stop_dir)


class FilterModule:
    def filters(self) -> dict:
        return {
            "iolab_host_call": iolab_host_call,
            "iolab_play": iolab_play,
            "iolab_call": iolab_call,
        }
