"""Syscall counts of a loader's measured window: `strace -c -f` attached to the rank, then parsed.

Why attach instead of starting the loader under strace: the interpreter's start-up
and `import torch` alone make tens of thousands of syscalls (openat, newfstatat,
read, mmap of every module and shared library), more than a short run's samples do.
A rank therefore starts `strace -c -f -o FILE -p <its own pid>` (an argv, no shell)
once its imports, data set index and DataLoader are ready, waits until the kernel
shows it traced, iterates, and stops strace (SIGINT: strace detaches and writes its
summary). `-f` follows every thread of the rank and the loader workers it forks
after the attach, so the count is the whole pipeline's, worker start-up included.

The summary table (`strace -c`) has no machine-readable form; its layout is fixed
(% time, seconds, usecs/call, calls, errors, syscall) and `iolab.shared.syscalls.parse_summary` reads it
strictly, refusing a line it does not understand.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


class Tracer:
    """strace -c -f attached to this process from start() to stop()."""

    def __init__(self, out: Path, log: Path):
        self.out, self.log = Path(out), Path(log)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 20.0) -> None:
        argv = ["strace", "-c", "-f", "-o", str(self.out), "-p", str(os.getpid())]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while _tracer_pid() != self.proc.pid:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"strace did not attach (see {self.log}): " + self.log.read_text()[-300:])
            time.sleep(0.01)
        time.sleep(0.1)  # let it attach the other threads too

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def _tracer_pid() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    return 0
