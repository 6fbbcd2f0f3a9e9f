"""The common start of a run's hosts, host side: say this host is ready, take the start time the controller sends
(iolab.drive.fanout: on stdin, or as a start file's modification time; the Ansible path: --start-at), check it, and
wait for it.

A start time is an epoch on the controller's clock, a little ahead of the moment it is sent: a host whose clock
agrees (iolab.drive.lease checks each host's against the controller's when the command takes its lease) waits for it
on its own. A time that is not a number, lies more than LATE seconds in the past (a start sent late, or a
clock behind the controller's: starting at once would start this host alone, with a skew nobody flags) or
further ahead than the run's timeout (a stale or future start file, a clock ahead) is refused: the tool does not
start, and the reason is the run's error. The wait is bounded by the timeout and ends with the task that
started it (Ctrl-C, a lost session).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import sys
import time
from pathlib import Path

from iolab.shared.protocol import READY_LINE

LATE = 30.0  # s: the most a start may lie in the past when it comes (later than that is no common start;
# below it the host starts at once and its skew, recorded, is flagged past the campaign's start_skew_max)
AHEAD = 600.0  # s: the most a start may lie ahead without a timeout (the longest notice is a few seconds)
TICK = 0.01  # s between looks at stdin, the start file, the parent


def refused(start_at: float, now: float, timeout: float | None) -> str | None:
    """Why the start time `start_at` cannot be waited for at `now` (None: it can)."""
    if not math.isfinite(start_at):
        return f"the start time {start_at!r} is not a time"
    if start_at < now - LATE:
        return (
            f"the start time came {now - start_at:.3g} s after it (more than {LATE:g} s): sent late, or this "
            "host's clock is ahead of the controller's; check its clock (chrony, NTP)"
        )
    limit = timeout or AHEAD
    if start_at > now + limit:
        return (
            f"the start time lies {start_at - now:.3g} s ahead, past the run's {limit:g} s: a stale start, or this "
            "host's clock is behind the controller's; check its clock (chrony, NTP)"
        )
    return None


def _parse(text: str) -> float:
    """A start line or file's time: its first word, an epoch (NaN when it is none: refused as not a time)."""
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return math.nan


def wait_for_start(start_file: Path, timeout: float | None, parent: int, timeline: dict) -> float | None:
    """Say this host is ready (READY_LINE and the time), then wait for the start time, on stdin or as start_file's
    modification time; note when in `timeline`, and what else the start line said (`without`: the hosts the run
    started without, iolab.drive.fanout). None, and why on stderr, when none came or it is refused."""
    ready = timeline["ready_at"] = time.time()
    print(f"{READY_LINE}{ready!r}", flush=True)
    start_at, reading = None, True  # stdin, until it is closed (the start may still come as the file)
    while start_at is None and os.getppid() == parent and not (timeout and time.time() - ready > timeout):
        if reading and select.select([sys.stdin], [], [], TICK)[0]:
            line = sys.stdin.readline()
            if not line:  # closed: the start may still come as the file
                reading = False
                continue
            start_at = _parse(line)  # a line that is no time is refused as one (`refused`)
            timeline["without"] = line.split()[1:]
            break
        elif not reading:
            time.sleep(TICK)
        with contextlib.suppress(FileNotFoundError):
            start_at = start_file.stat().st_mtime_ns / 1e9
    timeline["told_at"] = time.time()
    if start_at is None:
        print("no start time came (the session ended, or --timeout passed): the tool was not started", file=sys.stderr)
        return None
    return start_at


def wait_until(start_at: float, timeout: float | None, parent: int) -> bool:
    """Wait for `start_at` (checked first: `refused`); False, and why on stderr, when it is refused or the task
    that started this process went away meanwhile."""
    why = refused(start_at, time.time(), timeout)
    if why:
        print(f"{why}: the tool was not started", file=sys.stderr)
        return False
    while (left := start_at - time.time()) > 0:
        if os.getppid() != parent:
            print("the task that started it went away before the start: the tool was not started", file=sys.stderr)
            return False
        time.sleep(min(left, 0.1))
    return True
