"""The common start of a run's hosts, host side: say this host is ready, then take the start time the controller
sends (iolab.fanout), on stdin or as a start file's modification time."""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from pathlib import Path

from iolab.shared.protocol import READY_LINE


def wait_for_start(start_file: Path, timeout: float | None, parent: int, timeline: dict) -> float | None:
    """Say this host is ready (READY_LINE and the time), then wait for the start time, on stdin or as start_file's
    modification time; note when in `timeline`. None, and why on stderr, when none came."""
    ready = timeline["ready_at"] = time.time()
    print(f"{READY_LINE}{ready!r}", flush=True)
    start_at, reading = None, True  # stdin, until it is closed (the start may still come as the file)
    while start_at is None and os.getppid() == parent and not (timeout and time.time() - ready > timeout):
        if reading and select.select([sys.stdin], [], [], 0.01)[0]:
            line = sys.stdin.readline()
            if line:  # the start time; a line that is none ends the wait without one
                with contextlib.suppress(ValueError):
                    start_at = float(line)
                break
            reading = False
        elif not reading:
            time.sleep(0.01)
        with contextlib.suppress(FileNotFoundError):
            start_at = start_file.stat().st_mtime_ns / 1e9
    timeline["told_at"] = time.time()
    if start_at is None:
        print("no start time came (the session ended, or --timeout passed): the tool was not started", file=sys.stderr)
    return start_at
