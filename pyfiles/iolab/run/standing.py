"""Where a backend's hosts stand on its mount during a campaign (iolab.run.session): which are mounted, which lack
the data set, which the teardown must still reach; and how the playbooks' steps and runs change that.

A host that cannot run a run (not mounted, or without the data set it reads) has the run recorded as failed there,
with the reason, so that a later call of the campaign runs it again (`left_out`).
"""

from __future__ import annotations

import dataclasses

from rich.console import Console

from iolab.campaign.model import Run
from iolab.drive import runner
from iolab.errors import RunFailed
from iolab.measures.samples import ResultStore
from iolab.store.record import run_record


@dataclasses.dataclass
class Standing:
    """A backend's hosts on its mount. `lost` is the campaign's (hosts left out of the rest of it, and why)."""

    backend: str
    store: ResultStore
    lost: dict[str, str]
    console: Console
    mounted: list[str] = dataclasses.field(default_factory=list)  # mounted, until a mount or a run says otherwise
    teardown: list[str] = dataclasses.field(default_factory=list)  # every host the mount reached, no unmount checked
    no_data: dict[str, str] = dataclasses.field(default_factory=dict)  # mounted hosts without the data set, and why

    def active(self, run: Run, hosts: list[str]) -> list[str]:
        """The hosts of `hosts` that run `run`: mounted, and holding the data set if it reads one."""
        return [h for h in hosts if h in self.mounted and not (run.workload.uses_dataset and h in self.no_data)]

    def left_out(self, run: Run, hosts: list[str]) -> list[str]:
        """Record `run` as failed on those of its hosts that cannot run it: not mounted, or without the data set."""
        why = {h: self.lost.get(h, "host left out") for h in hosts if h not in self.mounted}
        if run.workload.uses_dataset:
            why |= {h: self.no_data[h] for h in hosts if h in self.mounted and h in self.no_data}
        return _skipped(self.store, run, why)

    def require(self, hosts: list[str]) -> None:
        """Stop (RunFailed) unless every one of `hosts` is mounted and holds the data set (the accelerator search)."""
        why = {h: self.lost.get(h, "not mounted") for h in hosts if h not in self.mounted}
        why |= {h: self.no_data[h] for h in hosts if h in self.no_data}
        if why:
            raise RunFailed("; ".join(f"{h}: {reason}" for h, reason in why.items()))

    def mount_ended(self, outcomes: dict[str, runner.HostOutcome]) -> dict[str, str]:
        """The mount's step ended: a host where it failed is no longer mounted (nor torn down, when unreachable),
        and is left out of the rest; return those hosts, with why."""
        left: dict[str, str] = {}
        for host in list(self.mounted):
            outcome = outcomes.get(host)
            if outcome is not None and not (outcome.failed or outcome.unreachable):
                continue
            self.mounted.remove(host)
            if outcome is not None and outcome.unreachable:
                self.teardown.remove(host)
            if host not in self.lost:
                why = outcome.message if outcome else "the playbook stopped"
                self.lost[host] = f"mounting {self.backend} failed: {why}"
            left[host] = self.lost[host]
        return left

    def data_ended(self, outcomes: dict[str, runner.HostOutcome]) -> dict[str, str]:
        """A mounted host whose data set was not made is left out of the runs that read it, with why."""
        for host in self.mounted:
            outcome = outcomes.get(host)
            if outcome is None or outcome.failed or outcome.unreachable:
                why = outcome.message if outcome else "the playbook stopped before it"
                self.no_data[host] = f"making the data set on {self.backend} failed: {why}"
        return dict(self.no_data)

    def unmounted(self, outcomes: dict[str, runner.HostOutcome]) -> None:
        """The unmount's step ended on these hosts: unmounted and checked, or what is left said; no teardown there."""
        self.teardown = [h for h in self.teardown if h not in outcomes]

    def lose_unreachable(self, result: runner.Result | None, title: str) -> None:
        """Leave the hosts the run found unreachable out of the rest of the campaign (a later call fills their gap).
        They stay in the teardown: what the run left there is torn down when the backend's session ends, over
        Ansible's own connection (a fan-out's gateway may be what failed); a host it cannot reach keeps its lease
        record, and the next command there cleans first (iolab.drive.lease)."""
        for outcome in result.failures() if result else []:
            if outcome.unreachable and outcome.host in self.mounted:
                self.lost[outcome.host] = f"unreachable since {title}: {outcome.message}"
                self.mounted.remove(outcome.host)
                self.console.print(
                    f"[yellow]{outcome.host} is unreachable:[/] left out of the rest; "
                    "run bench.all again later to fill its gap"
                )


def _skipped(store: ResultStore, run: Run, why: dict[str, str]) -> list[str]:
    """Record a run as failed on the hosts left out of it (`why`: each host's reason)."""
    if not why:
        return []
    records = [run_record(run, h, f"not run: {reason}") for h, reason in why.items()]
    store.add_run_records(records)
    return [
        f"{run.workload.name} on {run.backend.name} (rep {run.repetition}) not run on {h}: {reason}"
        for h, reason in why.items()
    ]
