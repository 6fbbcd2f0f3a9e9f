"""A campaign's progress for the person watching it: runs done and left, and the time still to go.

bench.run_campaign tells `Progress` when each run starts and ends. After each run it
prints one line (the same on a terminal and in a CI log):

    run 3/18: seq-read on tmpfs, rep 3: read_bw 2.1 GiB/s  (12 s; 3 done, 15 left, about 2 min 40 s to go)

On a terminal the live table of the playbook running (iolab.drive.runner) also shows
`status()` as its caption, updated as the run goes on, followed by the running run's
throughput now (iolab.drive.live).

The time to go: each run still to come is expected to take as long as the runs of the
same workload took so far (their mean), or, for a workload not run yet, its estimate
(the one `bench.all --dry-run` shows) scaled by how the finished runs compared with
their own estimates. Before the first run ends, the estimates alone. A search (the
accelerators, KV-cache users or clients) is one run of many probes: its estimate is
its expected probes (`search_probes`) times a probe's.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

from rich.console import Console


@dataclasses.dataclass(frozen=True)
class Planned:
    run_id: str
    kind: str  # runs of one kind take alike times: the workload's name
    estimate: float  # seconds, before any run has been timed


REPEATS = 3  # a search's probes of each point next to the boundary, at least (iolab.run.accelerators.search)


def search_probes(ceiling: int, repeats: int = REPEATS) -> int:
    """The probes a search up to `ceiling` is expected to run (iolab.run.accelerators.search): doubling from 1 to the
    ceiling (⌈log2 ceiling⌉ + 1 probes; a boundary found sooner leaves about as many to its bisection), then the two
    points next to the boundary probed again until each has `repeats`.

    >>> search_probes(8, 3), search_probes(16, 3), search_probes(1, 3)
    (8, 9, 5)
    """
    return math.ceil(math.log2(max(ceiling, 1))) + 1 + 2 * (repeats - 1)


def duration(seconds: float) -> str:
    """'45 s', '2 min 40 s', '1 h 05 min'."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class Progress:
    """Which planned runs are done, the one running, and the arithmetic of the time to go."""

    def __init__(self, planned: list[Planned], console: Console, clock: Callable[[], float] = time.monotonic):
        self.planned = {p.run_id: p for p in planned}
        self.console = console
        self.clock = clock
        self.took: dict[str, float] = {}  # run id → seconds, runs finished (extra repetitions too)
        self.current: Planned | None = None
        self.started: dict[str, float] = {}  # run id → when it started

    def start(self, planned: Planned) -> None:
        self.planned.setdefault(planned.run_id, planned)  # an extra repetition joins the plan when it starts
        self.current = planned
        self.started[planned.run_id] = self.clock()

    def drop(self, run_id: str) -> None:
        """A planned run that will not run (no host left for it): no longer counted as left."""
        self.planned.pop(run_id, None)

    def finish(self, title: str, headline: str, run_id: str | None = None) -> float:
        """The current run (or `run_id`, one started earlier) ended: print its one line; return how long it took."""
        assert self.current is not None or run_id is not None
        run_id = run_id or self.current.run_id  # type: ignore[union-attr]
        seconds = self.clock() - self.started[run_id]
        self.took[run_id] = seconds
        if self.current is not None and self.current.run_id == run_id:
            self.current = None
        self.console.print(f"{title}: {headline}  ({duration(seconds)}; {self.status()})", soft_wrap=True)
        return seconds

    def expected(self, planned: Planned) -> float:
        """Seconds a run is expected to take, from the runs timed so far (see the module's docstring)."""
        alike = [s for run_id, s in self.took.items() if self.planned[run_id].kind == planned.kind]
        if alike:
            return sum(alike) / len(alike)
        estimated = sum(self.planned[run_id].estimate for run_id in self.took)
        ratio = sum(self.took.values()) / estimated if self.took and estimated > 0 else 1.0
        return planned.estimate * ratio

    def left(self) -> list[Planned]:
        current = self.current.run_id if self.current else None
        return [p for run_id, p in self.planned.items() if run_id not in self.took and run_id != current]

    def eta(self) -> float:
        """Seconds to go: the runs not started, and what the current one has left of its expected time."""
        seconds = sum(self.expected(p) for p in self.left())
        if self.current is not None:
            seconds += max(0.0, self.expected(self.current) - (self.clock() - self.started[self.current.run_id]))
        return seconds

    def status(self) -> str:
        """'3 done, 15 left, about 2 min 40 s to go' ('… (estimated)' before the first run has ended)."""
        left = len(self.left()) + (self.current is not None)
        if not left:
            return f"{len(self.took)} done, none left"
        return f"{len(self.took)} done, {left} left, about {duration(self.eta())} to go" + (
            "" if self.took else " (estimated)"
        )
