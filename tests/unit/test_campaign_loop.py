"""The campaign loop's playbooks: Ansible starts once per backend for runs alike, and a step's failure is recorded.

Ansible is replaced here by a stand-in that plays each phase on the hosts still in the
playbook and drops a host that failed from the phases after it, as ansible-playbook does;
the real playbooks run in tests/integration (localhost) and tests/lab (simulated hosts).
This checks the controller's own decisions: what goes in which playbook, which host each
run records as left out and why, and which hosts a teardown playbook is left to.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from iolab.campaign.model import parse
from iolab.drive import runner
from iolab.drive.execute import Lab
from iolab.errors import RunFailed
from iolab.measures.samples import ResultStore
from iolab.run import bench


class Ansible(Lab):
    """A lab whose playbooks are played by a stand-in: `fail` maps a phase's name to {host: message}."""

    def __init__(self, hosts: list[str], fail: dict[str, dict[str, str]] | None = None):
        super().__init__(inventory=None, hosts=hosts, console=Console(file=io.StringIO()))  # type: ignore[arg-type]
        self.fail = fail or {}
        self.playbooks: list[list[str]] = []  # each playbook's phases, by name
        self.played_on: list[list[str]] = []

    def play(self, phases, title, hosts=None, cancellable=True, on_phase=None):  # noqa: ARG002 - Lab.play's signature
        phases = [phases] if isinstance(phases, runner.Phase) else phases
        names = [name(p) for p in phases]
        self.playbooks.append(names)
        self.played_on.append(list(hosts or self.hosts))
        left = list(hosts or self.hosts)
        every: dict[str, runner.HostOutcome] = {}
        for index, phase in enumerate(names):
            if not left:  # ansible-playbook stops once no host is left
                return runner.Result("failed", 2, every, "")
            outcomes = {}
            for host in list(left):
                outcome = runner.HostOutcome(host, task=phase)
                if host in self.fail.get(phase, {}):
                    outcome.failed, outcome.message = True, self.fail[phase][host]
                    left.remove(host)
                outcomes[host] = every[host] = outcome
            if on_phase:
                on_phase(index, outcomes)
        return runner.Result("successful" if len(left) == len(hosts or self.hosts) else "failed", 0, every, "")


def name(phase: runner.Phase) -> str:
    if phase.playbook == "storage.yml":
        return {"mounted": "mount", "unmounted": "unmount"}[phase.vars[phase.vars["storage_role"] + "_state"]]
    return phase.playbook.removesuffix(".yml")


def campaign(tmp_path: Path, **extra):
    raw = {
        "name": "unit-loop",
        "repetitions": 2,
        "backends": [
            {"name": "one", "type": "tmpfs", "size": "64MiB", "mountpoint": str(tmp_path / "one")},
            {"name": "two", "type": "tmpfs", "size": "64MiB", "mountpoint": str(tmp_path / "two")},
        ],
        "workloads": [{"name": "r", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "ramp": "0s"}],
        **extra,
    }
    return parse(raw, "test", tmp_path)


def errors(store: ResultStore, host: str) -> list[str]:
    return [r.get("error", "") for r in map(json.loads, store.runs_path.read_text().splitlines()) if r["host"] == host]


def test_runs_alike_play_with_their_mount_and_unmount_in_one_playbook_per_backend(tmp_path):
    lab = Ansible(["h1", "h2"])
    store = ResultStore(tmp_path / "results", "unit-loop")
    bench.run_campaign(campaign(tmp_path), lab, store)
    assert lab.playbooks == [
        ["setup", "mount", "run", "run", "unmount"],  # provisioning waits for the first playbook
        ["mount", "run", "run", "unmount"],  # unmounted and checked in it: no teardown playbook
    ]


def test_a_host_whose_folded_mount_fails_is_recorded_left_out_and_torn_down_alone(tmp_path):
    lab = Ansible(["h1", "h2"], fail={"mount": {"h2": "no room for the tmpfs"}})
    store = ResultStore(tmp_path / "results", "unit-loop")
    bench.run_campaign(campaign(tmp_path), lab, store)
    assert lab.playbooks[0] == ["setup", "mount", "run", "run", "unmount"]
    assert (lab.playbooks[1], lab.played_on[1]) == (["unmount"], ["h2"])  # a failed mount may have left a part
    assert lab.playbooks[2:] == [["mount", "run", "run", "unmount"]]
    assert lab.played_on[2] == ["h1"]  # left out of the rest of the campaign
    assert len(errors(store, "h2")) == 4
    assert all("mounting one failed: no room for the tmpfs" in e for e in errors(store, "h2"))


def test_a_host_that_fails_provisioning_is_left_out_and_never_torn_down(tmp_path):
    lab = Ansible(["h1", "h2"], fail={"setup": {"h2": "no python3"}})
    store = ResultStore(tmp_path / "results", "unit-loop")
    bench.run_campaign(campaign(tmp_path), lab, store)
    assert lab.playbooks == [["setup", "mount", "run", "run", "unmount"], ["mount", "run", "run", "unmount"]]
    assert all("no python3" in e for e in errors(store, "h2")) and len(errors(store, "h2")) == 4


def test_on_host_failure_abort_stops_in_the_first_playbook_and_tears_down_only_provisioned_hosts(tmp_path):
    lab = Ansible(["h1", "h2"], fail={"setup": {"h2": "no python3"}})
    store = ResultStore(tmp_path / "results", "unit-loop")
    with pytest.raises(RunFailed, match=r"provisioning failed \(on_host_failure: abort\): h2: .*no python3"):
        bench.run_campaign(campaign(tmp_path, on_host_failure="abort"), lab, store)
    assert lab.playbooks[1:] == [["unmount"]] and lab.played_on[1] == ["h1"]


def test_a_warm_up_is_not_alike_so_the_mount_plays_alone_before_it(tmp_path):
    spec = campaign(tmp_path)
    spec = spec.model_copy(update={"backends": spec.backends[:1]})
    spec.workloads[0] = spec.workloads[0].model_copy(update={"warmup": True})
    lab = Ansible(["h1"])
    bench.run_campaign(spec, lab, ResultStore(tmp_path / "results", "unit-loop"))
    assert lab.playbooks[0] == ["setup", "mount"]
    assert ["run"] in lab.playbooks[1:] and lab.playbooks[-1] == ["unmount"]
