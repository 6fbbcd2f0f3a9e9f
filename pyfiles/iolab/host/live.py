"""What a running tool moves, each second, for the person watching the campaign (host side, stdlib only).

`hostrun run` starts `Live` beside the tool. Each second it adds up what the tool's processes
(the tool and its descendants: fio's jobs, a loader's ranks and workers; telemetry.ToolTree)
have read and written so far — rchar and wchar of /proc/<pid>/io, every read(2) and write(2)
whether from the storage or the page cache, so a run on a tmpfs shows as well — and replaces
RUN_DIR/live.json, whole and at once, with the rates over the last second:

    {"t": 1795453036.9, "elapsed_s": 12.0, "read_Bps": 2.3e9, "write_Bps": 0.0, "cores": 1.9, "processes": 5}

A tool that says its own rate wins over the counters: fio, run with `--eta=always`, writes a status
line each second to its stdout (`[r=2446MiB/s][r=2446 IOPS]`), and its libaio or io_uring reads never
pass through read(2), so rchar would not see them; `tool_status` takes the last such line of the
tool's stdout.txt, and live.json then says `"source": "fio"` and has `iops` too. Until fio's first
status line (about 2 s in: `Jobs: 1 (f=1)` comes first) there is no live.json at all: the counters
of those seconds are fio's own small reads (`now: read 47.9 B/s` while fio read 5.6 GiB/s). A loader's ranks each
print a line a second (`iolab-loader: pid=123 samples_per_s=812.3 au_pct=93.1`): live.json then has
`samples_per_s` (the ranks added up) and `au_pct` (their mean) beside the byte rates. The calibration says its
time to go, from the steps it has timed (`iolab-calibrate: eta_s=42.0`): live.json then has `eta_s`.

The controller (iolab.drive.live) reads it while the run's task is still running, which Ansible's
own output cannot show. The figures are for watching, never recorded: the samples come from
the tool's own results. A process that ended takes its counts with it (its bytes drop out of
the sum): the rate of that second is floored at 0. The file is removed when the tool ends.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from iolab.shared.processes import ToolTree
from iolab.shared.protocol import LIVE_FILE

PIDS = "tool.pids"  # the tool tree's processes, for hostrun stop: {"pid": start time}, rewritten as it changes
_UNITS = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024, "Mi": 1 << 20, "Gi": 1 << 30}
_UNITS["Ti"] = 1 << 40
# fio's status line: ...[r=2446MiB/s,w=10.0MiB/s][r=2446,w=10 IOPS][eta 00m:01s]
_FIO_STATUS = re.compile(r"\[((?:[rw]=[\d.]+[kKMGT]?i?B/s,?)+)\]\[((?:[rw]=[\d.]+[kMG]?,?)+) IOPS\]")


# A loader rank's status line (iolab.host.loader.common): iolab-loader: pid=123 samples_per_s=812.3 au_pct=93.1
_LOADER_STATUS = re.compile(r"iolab-loader: pid=(\d+) samples_per_s=([\d.]+) au_pct=([\d.]+)")
# The calibration's time to go, from the steps it has timed (iolab.kinds.calibrate.host.Eta)
_CALIBRATE_STATUS = re.compile(r"iolab-calibrate: eta_s=([\d.]+)")


def tool_status(tail: str) -> dict[str, Any] | None:
    """What the tool says of itself at the end of its stdout (`tail`), or None: fio's last status line, or
    the loader's ranks' last lines (samples/s added up, AU averaged over the ranks), or the calibration's time to
    go."""
    eta = _CALIBRATE_STATUS.findall(tail)
    if eta:
        return {"source": "calibrate", "eta_s": float(eta[-1])}
    ranks = {pid: (float(rate), float(au)) for pid, rate, au in _LOADER_STATUS.findall(tail)}  # the last per rank
    if ranks:
        return {
            "source": "loader",
            "samples_per_s": sum(rate for rate, _ in ranks.values()),
            "au_pct": sum(au for _, au in ranks.values()) / len(ranks),
            "ranks": len(ranks),
        }
    found = _FIO_STATUS.findall(tail)
    if not found:
        return None
    rates, iops = found[-1]
    figures: dict[str, Any] = {"source": "fio", "read_Bps": 0.0, "write_Bps": 0.0, "iops": 0.0}
    for item in rates.split(","):
        kind, value = item.split("=")
        number, prefix = re.fullmatch(r"([\d.]+)([kKMGT]?i?)B/s", value).groups()  # type: ignore[union-attr]
        figures["read_Bps" if kind == "r" else "write_Bps"] = float(number) * _UNITS[prefix]
    for item in iops.split(","):
        number, prefix = re.fullmatch(r"([\d.]+)([kMG]?)", item.split("=")[1]).groups()  # type: ignore[union-attr]
        figures["iops"] += float(number) * _UNITS[prefix]
    return figures


class Live(threading.Thread):
    """Rewrites `path` every `interval` seconds with the tool tree's read/write rates, until stop()."""

    def __init__(
        self,
        path: Path,
        tool_pid: int,
        stdout: Path | None = None,
        interval: float = 1.0,
        proc_root: str = "/proc",
        command: str = "",
    ):
        super().__init__(name="live", daemon=True)
        self.path = Path(path)
        self.stdout = stdout  # the tool's stdout, for a status line of its own
        self.interval = interval
        self.tree = ToolTree(tool_pid, proc_root)
        # fio (`command`: the tool's argv[0]) says its rate only in its status line. Not read from /proc: a vfork'd
        # child's exec lets Popen return before the kernel has set its new cmdline, which then reads empty.
        self.own_rate = stdout is not None and os.path.basename(command) == "fio"
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()
        if self.is_alive():
            self.join(5)
        self.path.unlink(missing_ok=True)
        self.path.with_name(PIDS).unlink(missing_ok=True)

    def _record(self, members: dict[int, int]) -> None:
        """Keep the tree's processes beside the run, for `hostrun stop` (iolab.host.watch.kill_recorded)."""
        tmp = self.path.with_name(f".{PIDS}.tmp")
        tmp.write_text(json.dumps(members))
        os.replace(tmp, self.path.with_name(PIDS))

    def _tail(self, size: int = 8192) -> str:
        try:
            with open(self.stdout, "rb") as handle:  # type: ignore[arg-type]
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - size))
                return handle.read().decode(errors="replace")
        except OSError:
            return ""

    def run(self) -> None:
        started = prev_t = time.monotonic()
        prev_cpu = self.tree.cpu_seconds()
        prev_io = self.tree.io_bytes()
        recorded: dict[int, int] = {}
        while not self._stopped.wait(self.interval):
            now = time.monotonic()
            cpu, io = self.tree.cpu_seconds(), self.tree.io_bytes()  # one walk of /proc a second
            members = self.tree.members()
            if members.keys() - recorded.keys():
                try:
                    self._record(members)
                except OSError:
                    return
                recorded = members
            seconds = max(now - prev_t, 1e-6)
            figures = {
                "t": time.time(),
                "elapsed_s": round(now - started, 1),
                "read_Bps": max(0, io[0] - prev_io[0]) / seconds,
                "write_Bps": max(0, io[1] - prev_io[1]) / seconds,
                "cores": round(max(0.0, cpu - prev_cpu) / seconds, 2),
                "processes": self.tree.processes,
            }
            said = tool_status(self._tail()) if self.stdout else None
            prev_t, prev_cpu, prev_io = now, cpu, io
            if said:
                figures.update(said)
            elif self.own_rate:
                continue  # its counters are not its rate: nothing shown until it says its own
            tmp = self.path.with_name(f".{LIVE_FILE}.tmp")
            try:
                tmp.write_text(json.dumps(figures))
                os.replace(tmp, self.path)
            except OSError:  # the run's directory removed under it (a teardown): nothing to show any more
                return
