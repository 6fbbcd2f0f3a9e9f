"""The bench roles' commands, from iolab.workloads.hostcall: the one place both run routes build them (the loader
roles' filter_plugins are links to this directory)."""

from __future__ import annotations

import dataclasses
from typing import Any

from iolab.workloads.hostcall import host_call


def iolab_host_call(
    variables: dict, role: str, python: str, host: str, run_dir: str, play: dict, drop: bool
) -> dict[str, Any]:
    """`variables` (the role's, without their prefix) | iolab_host_call(ROLE, PYTHON, HOST, RUN_DIR, PLAY, DROP):
    the host's call as a mapping (prepare, run, tool, env, prepare_task, run_task)."""
    call = host_call(role, python, host, run_dir, dict(play), bool(drop), dict(variables))
    return dataclasses.asdict(call)


class FilterModule:
    def filters(self) -> dict:
        return {"iolab_host_call": iolab_host_call}
