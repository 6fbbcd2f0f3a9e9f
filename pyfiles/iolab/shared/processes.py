"""Process trees on this machine, read from /proc: what a tool started, and ending what is left of it (stdlib only).

The hosts measure and end a tool's tree with them (iolab.host.hostrun, iolab.host.live); the controller
ends what a cancelled ansible-playbook left (iolab.drive.runner) with the same code. `terminate` ends processes
by PID, gently then not: a backend's daemons on a host (iolab.host.mounts), a simulated host's (iolab.sim).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import signal
import time
from collections.abc import Callable
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")  # /proc/stat and /proc/<pid>/stat count in these ticks
PAGE = os.sysconf("SC_PAGE_SIZE")  # /proc/<pid>/stat's rss counts pages


def _read(path: str) -> str:
    with open(path, "rb") as handle:
        return handle.read().decode()


class ToolTree:
    """CPU seconds used by a process and its descendants, live and already reaped.

    Descendants, not the session or the process group: fio's job processes call
    setsid(). A live process counts its own time and that of the children it has
    reaped (utime+stime+cutime+cstime); once the owner of this object has reaped
    the tool, the tool's total moves into our RUSAGE_CHILDREN, counted from the
    moment this object was made. Descendants reaped by init (orphans) are lost.
    """

    def __init__(self, root: int, proc_root: str = "/proc"):
        self.root = root
        self.proc = proc_root
        self._outside: set[int] = set()  # PIDs known not to descend from root: never read again
        self._members: set[int] = set()
        self._starts: dict[int, int] = {}
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._reaped0 = usage.ru_utime + usage.ru_stime
        self._high = 0.0
        self.processes = 0
        self.rss_bytes = 0  # the live processes' resident memory summed, as of the last cpu_seconds()

    def _stat(self, pid: int) -> list[str] | None:
        try:
            text = _read(f"{self.proc}/{pid}/stat")
        except OSError:
            return None
        return text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses

    def cpu_seconds(self) -> float:
        alive: set[int] = set()
        stats: dict[int, list[str]] = {}
        for entry in os.scandir(self.proc):
            if entry.name.isdigit():
                pid = int(entry.name)
                alive.add(pid)
                if pid not in self._outside:
                    fields = self._stat(pid)
                    if fields is not None:
                        stats[pid] = fields
        # A parent's PID may be larger than its child's (PIDs wrap): settle membership until nothing changes.
        members = (self._members & alive) | ({self.root} & stats.keys())
        unsettled = {pid: int(fields[1]) for pid, fields in stats.items() if pid not in members}
        changed = True
        while changed:
            changed = False
            for pid, ppid in list(unsettled.items()):
                if ppid in members:
                    members.add(pid)
                    del unsettled[pid]
                    changed = True
        self._outside = (self._outside & alive) | set(unsettled)
        self._members = members
        self._starts = {pid: int(stats[pid][19]) for pid in members if pid in stats}  # start times: PIDs recur
        self.processes = len(members)
        self.rss_bytes = sum(int(stats[pid][21]) for pid in members if pid in stats) * PAGE
        ticks = sum(int(v) for pid in members if pid in stats for v in stats[pid][11:15])  # u/s/cu/cs time
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        # Never backwards: a process caught between its exit and its reaping would otherwise dip and come back.
        self._high = max(self._high, ticks / HZ + (usage.ru_utime + usage.ru_stime - self._reaped0))
        return self._high

    def members(self) -> dict[int, int]:
        """The tree's live processes as of the last cpu_seconds(), each with its start time (clock ticks since
        boot: a PID reused later is another process). A process stays a member once seen, even after its
        parent ended: fio's job processes call setsid() and outlive a killed fio main process."""
        return dict(self._starts)

    def io_bytes(self) -> tuple[int, int]:
        """Bytes read and written so far by the live processes of the tree, as of the last cpu_seconds():
        rchar and wchar of /proc/<pid>/io, every read(2) and write(2), from storage or the page cache alike."""
        read = written = 0
        for pid in self._members:
            try:
                fields = dict(line.split(": ", 1) for line in _read(f"{self.proc}/{pid}/io").splitlines())
            except (OSError, ValueError):
                continue  # ended since
            read, written = read + int(fields.get("rchar", 0)), written + int(fields.get("wchar", 0))
        return read, written


def started(pid: int) -> int | None:
    """The process's start time in clock ticks after boot (/proc/PID/stat field 22): PID and it name one process
    (PIDs recur); None when it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _running(members: dict[int, int]) -> list[int]:
    """The processes of `members` (PID → start time) still running (not zombies) as the same processes."""
    alive = []
    for pid, started in members.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[19]) == started and fields[0] not in ("Z", "X"):
            alive.append(pid)
    return alive


TOOL_MARK = "IOLAB_TOOL_OF"  # in the environment of a run's tool, and so of every process it forks: the run's directory


def marked(value: str) -> dict[int, int]:
    """The processes whose environment says TOOL_MARK=`value` (iolab.host.hostrun starts a run's tool so): PID →
    start time. It finds what a recorded list misses: a process the tool forked after the list was last written."""
    needle = f"{TOOL_MARK}={value}".encode()
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and (start := started(int(entry.name))) is not None:
            found[int(entry.name)] = start
    return found


def end_processes(members: dict[int, int], sig: int = signal.SIGKILL, wait: float = 5.0) -> list[int]:
    """Send `sig` to what of `members` still runs, wait up to `wait` seconds; return those still running."""
    for pid in _running(members):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    deadline = time.time() + wait
    while time.time() < deadline and _running(members):
        time.sleep(0.05)
    return _running(members)


def alive(pid: int) -> bool:
    """True unless the process is gone or a zombie (whoever reaps it may be slow)."""
    return _state(pid) not in (None, "Z", "X")


def stopped(pid: int) -> bool:
    """Whether `pid` is stopped (SIGSTOP, a debugger), a zombie, or gone: a process that will not go on by itself."""
    return _state(pid) in (None, "T", "t", "Z", "X")


def _state(pid: int) -> str | None:
    """The process's state letter (/proc/PID/stat's third field), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def terminate(pids: list[int], grace: float) -> tuple[list[int], list[int]]:
    """SIGTERM `pids`, wait up to `grace` seconds, SIGKILL what is left and wait up to 5 s more.

    Returns the processes SIGTERM did not end (those SIGKILL was sent to) and those still alive after SIGKILL.
    """
    killed: list[int] = []
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while (pids := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not pids:
            break
        if sig == signal.SIGTERM:
            killed = list(pids)
    return killed, pids


def naming(*words: bytes) -> int:
    """How many processes of this machine (this one aside) have every one of `words` among their arguments: a
    reference tool's ranks on this host (iolab.kinds.dlio.host, iolab.kinds.kvcache.host_reference)."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            args = Path(entry.path, "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        count += all(word in args for word in words)
    return count


def lock_holder(fd: int) -> int | None:
    """The PID of the process that holds an flock on the open file `fd` (/proc/locks), None when none does."""
    st = os.fstat(fd)
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()  # "1: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF"; a waiter's line has "->"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == where and fields[4].lstrip("-").isdigit():
            return int(fields[4])
    return None


def lock_within(fd: int, wait_s: float, worth_waiting: Callable[[], bool] = lambda: True) -> bool:
    """Take an exclusive flock on the open file `fd`, waiting up to `wait_s` s for whoever holds it, and only while
    `worth_waiting()`: whether it was taken (iolab.host.runs' run lock, iolab.sim's lock of the simulated labs)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline or not worth_waiting():
                return False
            time.sleep(0.1)
