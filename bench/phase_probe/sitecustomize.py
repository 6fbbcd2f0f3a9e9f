"""Where one `./lab` command's time goes, from inside it (bench/harness_phases.py puts this directory on
PYTHONPATH and names a file in $IOLAB_PHASES_OUT).

Python imports `sitecustomize` at start-up: this one, only in the process that finds $IOLAB_PHASES_OUT (it takes the
variable out of the environment, so ansible-playbook and the hosts' processes never see it), wraps the functions
below as their modules are first imported and appends one JSON line per call to that file: {"span", "start", "end"}
(epoch s); and one per ansible-runner event: {"event", "task", "at"}. The code measured is the command's own.
"""

from __future__ import annotations

import functools
import importlib.abc
import json
import os
import sys
import time
from typing import Any

# module → the functions (or Class.method) timed in it
SPANS = {
    "tasks.bench": [],
    "iolab.campaign.model": ["load", "check_commands"],
    "iolab.campaign.gpus": ["check_hosts"],
    "iolab.drive.lease": ["_take", "_release"],
    "iolab.drive.release": ["build"],
    "iolab.drive.runner": ["run"],
    "iolab.drive.execute": ["_Playbook._fan", "_Playbook._steps"],
    "iolab.results.store": ["open_store"],
    "iolab.run.bench": ["run_campaign"],
    "iolab.run.session": ["record_run"],
}


def _write(out: Any, line: dict[str, Any]) -> None:
    out.write(json.dumps(line) + "\n")
    out.flush()


def _timed(out: Any, name: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.time()
        try:
            return fn(*args, **kwargs)
        finally:
            label = name
            if name == "run":  # runner.run: which playbooks, and the title
                phases = args[0] if isinstance(args[0], list) else [args[0]]
                label = f"ansible-playbook {'+'.join(p.playbook for p in phases)} ({kwargs.get('title', '')})"
            _write(out, {"span": label, "start": start, "end": time.time()})

    return wrapper


def _events(out: Any, handle: Any) -> Any:
    @functools.wraps(handle)
    def wrapper(self: Any, event: dict[str, Any]) -> bool:
        data = event.get("event_data", {})
        _write(
            out, {"event": event.get("event", ""), "task": data.get("task", data.get("play", "")), "at": time.time()}
        )
        return handle(self, event)

    return wrapper


def _started() -> float:
    """This process's start (epoch s): `./lab`'s, which execs invoke in the same process."""
    ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])  # noqa: SIM115 - read once
    boot = time.time() - float(open("/proc/uptime").read().split()[0])  # noqa: SIM115 - to 10 ms, btime to 1 s
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _patch(out: Any, module: Any) -> None:
    if module.__name__ == "tasks.bench":  # the task's code starts: what came before was start-up and imports
        _write(out, {"span": "start-up and imports until the tasks", "start": _started(), "end": time.time()})
        return
    if module.__name__ == "iolab.drive.runner":
        module._Progress.handle = _events(out, module._Progress.handle)
    for name in SPANS[module.__name__]:
        owner_name, _, attr = name.rpartition(".")
        owner = getattr(module, owner_name) if owner_name else module
        setattr(owner, attr, _timed(out, attr, getattr(owner, attr)))


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, out: Any):
        self.out = out

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in SPANS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        execute, out = spec.loader.exec_module, self.out

        def exec_module(module: Any) -> None:
            execute(module)
            _patch(out, module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_path = os.environ.pop("IOLAB_PHASES_OUT", None)
if _path:
    import importlib.util

    sys.meta_path.insert(0, _Finder(open(_path, "a")))  # noqa: SIM115 - open for the life of the process
