"""Sampling profilers beside a running tool (host side, stdlib only): perf and py-spy.

    perf     `perf record -a -g -F 99 -N` for as long as the tool runs: every CPU, kernel and
             user stacks — where a storage client (NFS, Ceph, FUSE) spends its time shows up
             in the kernel's frames. Kept: perf.data, and perf-report.txt (`perf report
             --stdio`: the hottest symbols by command and shared object) to read anywhere.
    py-spy   `py-spy record --pid TOOL --subprocesses` (a wall-clock sampler, 100 Hz, with
             idle frames: a loader's worker waiting on a read shows as waiting): the tool and
             its worker processes, as collapsed stacks in py-spy.txt (flamegraph input, one
             `frame;frame;… count` line per stack).

Both start once the tool has started and stop when it ends; a profiler that cannot
start or fails says why in `errors`, and the run goes on without it.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

NAMES = ("perf", "py-spy")
PERF_DATA, PERF_REPORT, PY_SPY = "perf.data", "perf-report.txt", "py-spy.txt"


def executable(name: str) -> str | None:
    """The profiler's binary: py-spy from this virtualenv first, else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def missing(names: list[str]) -> list[str]:
    """Sentences for the profilers this host lacks."""
    how = {"perf": "install linux-perf", "py-spy": "pip install py-spy into /opt/iolab/venv"}
    return [
        f"profiler {n} is not installed ({how[n]}; lab.setup does it when a campaign asks for it)"
        for n in names
        if executable(n) is None
    ]


class Profilers:
    """The profilers of one run, started on the tool's PID and stopped after it."""

    def __init__(self, run_dir: Path, names: list[str], pid: int):
        self.run_dir, self.names, self.pid = run_dir, names, pid
        self.procs: dict[str, subprocess.Popen] = {}
        self.errors: list[str] = []

    def start(self) -> None:
        argv = {
            "perf": [
                executable("perf") or "perf",
                "record",
                "-a",
                "-g",
                "-F",
                "99",
                "--no-buildid-cache",  # at its end perf would copy every sampled DSO into ~/.debug (torch's: GBs)
                "--quiet",
                "-o",
                str(self.run_dir / PERF_DATA),
            ],
            "py-spy": [
                executable("py-spy") or "py-spy",
                "record",
                "--pid",
                str(self.pid),
                "--subprocesses",
                "--idle",
                "--rate",
                "100",
                "--nonblocking",
                "--format",
                "raw",
                "-o",
                str(self.run_dir / PY_SPY),
            ],
        }
        for name in self.names:
            log = open(self.run_dir / f"{name}.log", "wb")
            try:
                self.procs[name] = subprocess.Popen(
                    argv[name], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
            except OSError as exc:
                self.errors.append(f"{name} did not start: {exc.strerror}")
            finally:
                log.close()

    def stop(self) -> dict[str, Any]:
        """Stop them (perf on SIGTERM writes its data, and exits by it; py-spy ends with the tool); return files and
        errors."""
        for name, proc in self.procs.items():
            # perf stops on SIGTERM as on SIGINT, writing its data; SIGTERM because a caller may ignore or block
            # SIGINT (the CI's pytest-xdist worker did), and perf inherits that: SIGINT was lost there.
            if name == "perf" and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
                self.errors.append(f"{name} did not stop within 30 s and was killed")
            if proc.returncode not in (0, -signal.SIGINT, 128 + signal.SIGINT, -signal.SIGTERM, 128 + signal.SIGTERM):
                tail = (self.run_dir / f"{name}.log").read_text(errors="replace").strip().splitlines()
                self.errors.append(f"{name} exited {proc.returncode}: {tail[-1] if tail else 'no message'}")
        if "perf" in self.procs and (self.run_dir / PERF_DATA).exists():
            self._perf_report()
        files = [f for f in (PERF_DATA, PERF_REPORT, PY_SPY) if (self.run_dir / f).exists()]
        return {"profilers": self.names, "files": files, "errors": self.errors}

    def _perf_report(self) -> None:
        argv = [
            executable("perf") or "perf",
            "report",
            "--stdio",
            "--no-children",
            "-g",
            "none",
            "--sort",
            "comm,dso,sym",
            "--percent-limit",
            "0.5",
            "-i",
            str(self.run_dir / PERF_DATA),
        ]
        with open(self.run_dir / PERF_REPORT, "wb") as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=300)
        if done.returncode != 0:
            self.errors.append(
                f"perf report exited {done.returncode}: {done.stderr.decode(errors='replace').strip()[-200:]}"
            )
