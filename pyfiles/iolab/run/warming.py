"""Warming a backend's cache before a run, as its workload asks (iolab.run.session plays the run after it).

`warmup: true` plays one unrecorded run of a point before its first measured one on a mount. The warm run of
`cache: warm` follows its warm_command (run.yml runs it), or the cold run of the same repetition when that just
ran on the same hosts, or else an unrecorded pass of the workload. A warm-up that fails is a warning: the measured
run follows, and says how its cache was warmed.
"""

from __future__ import annotations

import dataclasses
import shutil

from iolab.campaign.model import Run
from iolab.drive.execute import Lab, play_run, run_phase
from iolab.measures.samples import ResultStore


@dataclasses.dataclass
class Warming:
    """One mount's warm-ups: the points warmed on it, and the run just run (its hosts, whether it succeeded)."""

    lab: Lab
    store: ResultStore
    warmed: set[tuple] = dataclasses.field(default_factory=set)
    previous: tuple[Run, list[str], bool] | None = None

    def warm(self, run: Run, hosts: list[str]) -> str | None:
        """Warm up before `run` as its workload asks; return how a warm run's cache was warmed (None: a cold run)."""
        key = (run.point[:3], tuple(hosts))
        if run.workload.warmup and key not in self.warmed:
            self._pass(run, hosts, "warm-up run (warmup: true)")
            self.warmed.add(key)
        if run.cache_pass != "warm":
            return None
        if run.workload.warm_command:
            return "after the warm_command " + " ".join(run.workload.warm_command)
        previous = self.previous
        if (
            previous
            and previous[2]
            and previous[1] == hosts
            and previous[0].cache_pass == "cold"
            and previous[0].point[:3] == run.point[:3]
            and previous[0].repetition == run.repetition
        ):
            return "right after the cold run of the same repetition, caches not dropped"
        self._pass(run, hosts, "warm-up pass (cache: warm)")
        return "after an unrecorded pass of the workload, caches not dropped"

    def _pass(self, run: Run, hosts: list[str], what: str) -> None:
        """An unrecorded run of `run`'s workload (its files are fetched and discarded); a failure is a warning."""
        warm = run.model_copy(update={"run_id": f"{run.run_id}-warmup", "cache_pass": "warm"})
        scratch = self.store.raw_dir(warm.run_id)
        try:
            result = play_run(self.lab, [run_phase(warm)], warm, scratch, f"{what}: {run.label()}", hosts)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        errors = [o.describe() for o in result.failures()]
        if errors:
            self.lab.console.print(f"[yellow]{what} of {run.label()} failed[/] (the measured run follows): {errors[0]}")
        else:
            self.lab.console.print(f"{what} of {run.label()}: done, not recorded")


def needed(run: Run) -> bool:
    """Whether `run` is warmed first (and so plays alone)."""
    return run.workload.warmup or run.cache_pass == "warm"
