"""CPU time of a process and all its descendants, read from /proc (stdlib only).

A loader's cost is spread over its main process, its worker processes and their
threads. `tree_cpu_seconds(pid)` adds, for every live process of the tree, its own
user + system time and the time of the children it has already reaped (cutime,
cstime), so workers that ended and were waited for still count. Take it at the
start and the end of a window; the difference is the CPU the tree used in it.
"""

from __future__ import annotations

import os

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, utime+stime+cutime+cstime in seconds) of a live process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, (utime + stime + cutime + cstime) / _TICK


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds used so far by process `root` (default: this one) and all its live descendants."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        found = _stat(int(name))
        if found is None:
            continue
        ppid, seconds = found
        cpu[int(name)] = seconds
        children.setdefault(ppid, []).append(int(name))
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += cpu.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    return total
