"""A fault that failed, hung or never fired makes a failed run, never a clean faulted one; and a campaign file edited
between the calls of a resume is refused or said, never silent. The injector here runs real commands (`false`, a
`sleep` that hangs) on a schedule whose clock the test gives; the ledger reads a real store. The same through
bench.all on localhost is tests/integration/test_fault_outcomes.py's."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from iolab.campaign import model as campaign
from iolab.campaign.hosts import Inventory
from iolab.drive import fault_actions, injector, lease
from iolab.errors import UserError
from iolab.measures.samples import ResultStore
from iolab.parsers import faults as figures_of
from iolab.shared.processes import alive
from iolab.store import ledger
from support import sample

TMPFS = {"name": "mem", "type": "tmpfs", "size": "256MiB"}
FIO = {"name": "rd", "type": "fio", "profile": "seq-read-1m", "runtime": "40s", "ramp": "1s"}
# A command that hangs, and says the PID of the child it waits for in argv[1] (a grandchild of the injector's)
HANGS = "import subprocess,sys; p=subprocess.Popen(['sleep','600']); open(sys.argv[1],'w').write(str(p.pid)); p.wait()"


def write(path: Path, workloads: list[dict], backends: list[dict] | None = None) -> campaign.Campaign:
    path.write_text(yaml.safe_dump({"name": "f", "backends": backends or [TMPFS], "workloads": workloads}))
    return campaign.load(path)


def faulted_run(tmp_path: Path, *faults: dict) -> campaign.Run:
    return campaign.expand(write(tmp_path / "c.yml", [{**FIO, "faults": list(faults)}]))[0]


def stand_in_lab() -> SimpleNamespace:
    """A lab as the schedule reads it (the release, the inventory, the started hook): no host is reached."""
    inventory = Inventory(Path("i"), ("gpu01",), {}, {"gpu01": {}})
    return SimpleNamespace(extravars=lambda: {"iolab_release": "r"}, inventory=inventory, started=None, hosts=["gpu01"])


def schedule(tmp_path: Path, run: campaign.Run, seconds: float) -> injector.Schedule:
    """The run's schedule on a clock started 3.5 s ago, left `seconds` after (the run's end)."""
    with injector.Schedule(stand_in_lab(), run, ["gpu01"], tmp_path / "raw") as faults:  # type: ignore[arg-type]
        faults.told(time.time() - 3.5)
        time.sleep(seconds)
    return faults


def test_a_failed_injection_fails_the_run_on_every_host_it_did_not_fail_on_already(tmp_path):
    run = faulted_run(tmp_path, {"at": "4s", "what": "command", "argv": ["false"]})
    faults = schedule(tmp_path, run, 1.5)
    why = "fault command false at 4 s, healed by the run's teardown: not injected (false: exit status 1)"
    assert faults.failed == [why]
    assert faults.failing({}) == {"gpu01": ("faults", why)}
    assert faults.failing({"gpu01": ("Run fio", "exit 1")}) == {"gpu01": ("Run fio", "exit 1")}  # its own first
    assert faults.failing(None) is None  # a run that did not start stays so


def test_a_hung_command_is_killed_with_its_children_when_the_run_ends_and_is_a_failed_injection(tmp_path):
    pid_file = tmp_path / "child.pid"
    run = faulted_run(tmp_path, {"at": "4s", "what": "command", "argv": [sys.executable, "-c", HANGS, str(pid_file)]})
    began = time.monotonic()
    faults = schedule(tmp_path, run, 2.0)
    took = time.monotonic() - began
    assert took < 5, f"the run's end waited {took:.1f} s for the hung command"  # not fault_actions.CLI_S (60 s)
    child = int(pid_file.read_text())
    # its session was killed, not only the process the injector started (SIGKILL is sent to the session at once;
    # a loaded machine may schedule the child's death a moment later)
    gone_by = time.monotonic() + 5
    while alive(child) and time.monotonic() < gone_by:
        time.sleep(0.05)
    assert not alive(child)
    assert len(faults.failed) == 1 and faults.failed[0].endswith("the run ended before it did; killed)")
    injected = [e for e in figures_of.read_lines(tmp_path / "raw" / figures_of.FAULTS_FILE) if e["type"] == "inject"]
    assert [e["ok"] for e in injected] == [False]
    assert faults.failing({})["gpu01"][1] == faults.failed[0]  # type: ignore[index]


def test_a_command_that_outlives_its_time_limit_is_killed_and_failed():
    began = time.monotonic()
    ok, said = fault_actions.run_argv(["sleep", "600"], timeout=0.5)
    assert not ok and said == "sleep 600: no answer in 0.5 s; killed" and time.monotonic() - began < 3
    assert fault_actions.run_argv(["true"]) == (True, "true: done")


def test_a_fault_whose_time_never_came_fails_the_run(tmp_path):
    later = {"at": "30s", "what": "command", "argv": ["touch", str(tmp_path / "x")]}
    run = faulted_run(tmp_path, {"at": "4s", "what": "command", "argv": ["true"]}, later)
    faults = schedule(tmp_path, run, 1.5)
    assert len(faults.failed) == 1
    assert faults.failed[0].startswith(
        f"fault command touch {tmp_path}/x at 30 s, healed by the run's teardown: never fired"
    )
    assert faults.failed[0].endswith("s after its common start; move the fault earlier)")
    assert faults.failing({})["gpu01"] == ("faults", faults.failed[0])  # type: ignore[index]
    assert not (tmp_path / "x").exists()


def test_faults_past_a_kvcache_trial_are_refused_when_the_campaign_loads_and_a_loaders_are_checked_after(tmp_path):
    kv = {"name": "kv", "type": "kvcache", "model": "llama3.1-8b", "users": 2, "duration": "10s"}
    late = {"at": "20s", "what": "command", "argv": ["true"]}
    with pytest.raises(UserError) as refused:
        write(tmp_path / "kv.yml", [{**kv, "faults": [late]}])
    assert str(refused.value).endswith(
        "falls at or past the run's end (20 s: the trial's duration and about 10 s of its ranks' start and end); "
        "lengthen the duration or move the fault"
    )
    write(tmp_path / "kv.yml", [{**kv, "faults": [{**late, "at": "5s"}]}])


# --- a campaign file edited between the calls of a resume ------------------------------------------------------


def begun(tmp_path: Path, workloads: list[dict]) -> tuple[ResultStore, campaign.Campaign]:
    """A store begun by a call of the campaign, its first run stored."""
    spec = write(tmp_path / "c.yml", workloads)
    store = ResultStore(tmp_path / "results", spec.name)
    runs = campaign.expand(spec)
    ledger.begin(store, spec, runs, ["localhost"], lease.record("campaign test"))
    store.add_samples([sample(spec.name, runs[0].run_id, 1e9, workload=runs[0].workload.name)])
    return store, spec


def test_a_stored_run_the_edited_file_no_longer_has_is_refused_naming_it_and_the_fix(tmp_path):
    store, _ = begun(tmp_path, [FIO, {**FIO, "name": "wr", "profile": "seq-write-1m"}])
    edited = write(tmp_path / "c.yml", [{**FIO, "runtime": "50s"}, {**FIO, "name": "wr", "profile": "seq-write-1m"}])
    with pytest.raises(UserError) as refused:
        ledger.check(store, edited, campaign.expand(edited), store.completed())
    started = ledger.read(store.dir)["started"]  # type: ignore[index]
    assert str(refused.value) == (
        f"campaign f: its file changed since {store.dir} was begun ({started}): 1 stored run(s) are no longer in it "
        "(rd on mem, rep 1); run with --no-resume to start over (the stored results are moved aside, kept), or put "
        "the file back"
    )


def test_runs_added_to_the_file_resume_and_a_changed_run_not_stored_yet_is_said(tmp_path):
    store, spec = begun(tmp_path, [FIO, {**FIO, "name": "wr", "profile": "seq-write-1m"}])
    assert ledger.check(store, spec, campaign.expand(spec), store.completed()) is None  # the same file
    more = write(tmp_path / "c.yml", [FIO, {**FIO, "name": "wr", "profile": "seq-write-1m"}, {**FIO, "name": "x"}])
    more = more.model_copy(update={"repetitions": 3})
    assert ledger.check(store, more, campaign.expand(more), store.completed()) is None
    changed = write(tmp_path / "c.yml", [FIO, {**FIO, "name": "wr", "profile": "seq-write-1m", "runtime": "9s"}])
    assert ledger.check(store, changed, campaign.expand(changed), store.completed()) == (
        "campaign f: its file changed since the last call: 1 run(s) of the earlier plan, none stored, are no longer "
        "in it; the runs are the file's as it is now"
    )
