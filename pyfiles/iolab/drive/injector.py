"""A faulted run's faults, applied on the controller on the clock of the run's common start, and recorded.

    with Schedule(lab, run, hosts, raw_dir) as schedule:     # around the run's playbook (iolab.run.session)
        result = play_run(...)
    schedule.left                                             # what a failed heal left, as sentences

The clock: the run's hosts start their tool at a common time T that the play chooses (roles/iolab_host's
sync_start); iolab.drive.runner hears it as the play sets it (Lab.started) and the schedule applies each fault at
T + `at` and heals it at T + `heal_at` on the controller's clock, from a thread of its own. What it did goes
beside the run's files, in raw/<run_id>/faults.jsonl (JSON lines, appended and flushed as they happen: the
clock, each injection and heal with its planned and actual times, its lateness (`late_s`) and outcome, and
what the teardown did). On a Ceph backend, a process polls `ceph status` once a second from the schedule's
start until the cluster's health is as it was before the first fault (at most HEALTH_WAIT after the run),
into ceph_health.jsonl. iolab.parsers.faults reads both.

When the run ends, its teardown heals what is still injected (a fault healed past the run's end, or never):
the OSD back in, the daemon started, the link up; a heal that fails is said in one line naming what it left
(`left`), and the campaign ends on it. A schedule whose clock never came (the run failed before its start)
injects nothing, and says so.

A run whose fault was not injected (its action failed, or a campaign's command hung: killed after
fault_actions.CLI_S, or when the run ends) or never fired (the run ended before the fault's time: a kind whose
length the campaign does not say, a loader's, is checked here rather than when the campaign loads) measured no
fault: it is a failed run on every host (`failing`), with no samples, and the next call runs it again.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

from iolab import paths
from iolab.backends.base import CephBackend
from iolab.campaign.model import Run
from iolab.drive import fault_actions, runner
from iolab.drive.execute import HOST_DIR, HOST_PYTHON, OWNER, Lab
from iolab.errors import UserError
from iolab.faults import AnyFault
from iolab.parsers.faults import FAULTS_FILE, HEALTH_FILE, health_key, health_text, read_lines

HEALTH_WAIT = 180.0  # s after the run the cluster has to be as healthy as before its first fault
# The controller's own python, with librados (python3-rados, which ceph-common depends on): the poller is a
# host-side program (iolab.host.ceph_osds) run here as a process; the controller never imports the host side.
SYSTEM_PYTHON = "/usr/bin/python3"


def preflight(runs: list[Run], lab: Lab) -> None:
    """Every fault of the runs checked on this controller before anything starts (fault_actions.preflight):
    UserError in one line, naming the fault and the fix."""
    seen: set[tuple[str, str, str]] = set()
    for run in runs:
        for fault in run.workload.faults:
            key = (run.backend.name, fault.model_dump_json(), ",".join(run.on(lab.hosts)))
            if key not in seen:
                seen.add(key)
                fault_actions.preflight(fault, run.backend, lab.inventory, run.on(lab.hosts))
    if any(isinstance(r.backend, CephBackend) and r.workload.faults for r in runs):
        done = subprocess.run([SYSTEM_PYTHON, "-c", "import rados"], capture_output=True, check=False)
        if done.returncode != 0:
            raise UserError(
                f"a fault on a Ceph backend polls the cluster's health with {SYSTEM_PYTHON} and librados, which it "
                "cannot import: apt-get install python3-rados"
            )


def check_phase(run: Run, hosts: list[str], holds_data: bool) -> runner.Phase:
    """After a faulted run: the check that it lost nothing (playbooks/intact.yml), the data set verified on
    `hosts` when the backend holds it (`holds_data`)."""
    return runner.Phase(
        "intact.yml",
        {
            "iolab_run_id": run.run_id,
            "intact_dataset_hosts": [str(h) for h in hosts] if holds_data else [],  # plain names, for YAML
            "intact_dataset_root": run.backend.shared_dataset_root,
            "intact_target": run.backend.target,
        },
    )


class _Health:
    """`ceph status` once a second into raw/<run_id>/ceph_health.jsonl: a process of the controller's system
    python."""

    def __init__(self, backend: CephBackend, path: Path):
        cluster = {"conf": backend.ceph_conf, "keyring": backend.keyring, "client": backend.client}
        self.path = path
        argv = [SYSTEM_PYTHON, "-m", "iolab.host.ceph_osds", "health", "--cluster", json.dumps(cluster)]
        self.proc = subprocess.Popen(
            [*argv, "--out", str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={"PYTHONPATH": str(paths.ROOT / "pyfiles"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )

    def records(self) -> list[dict[str, Any]]:
        return read_lines(self.path)

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()  # it ends when its stdin closes
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Schedule:
    """A faulted run's faults, on its clock (see the module's docstring)."""

    def __init__(self, lab: Lab, run: Run, hosts: list[str], raw_dir: Path):
        self.lab, self.run, self.hosts, self.raw_dir = lab, run, hosts, raw_dir
        release = lab.extravars()["iolab_release"]
        self.context = fault_actions.Context(
            backend=run.backend,
            inventory=lab.inventory,
            run_dirs={h: f"{HOST_DIR}/runs/{OWNER}/{h}/{run.run_id}" for h in hosts},
            host_python=["env", f"PYTHONPATH={HOST_DIR}/releases/{release}", HOST_PYTHON],
        )
        self.faults: list[AnyFault] = list(run.workload.faults)
        self.start_at: float | None = None
        self.clock = threading.Event()
        self.stopping = threading.Event()
        self.injected: dict[int, bool] = {}  # each fault injected → healed since (or nothing to heal)
        self.lock = threading.Lock()  # one action at a time, and one writer of the record
        self.left: list[str] = []  # what failed heals left, in sentences
        self.failed: list[str] = []  # faults not injected, or never fired, in sentences: the run measured none
        self.health: _Health | None = None
        self.out: IO[str] | None = None
        self.thread = threading.Thread(target=self._serve, name="iolab-faults", daemon=True)

    # --- the record ---------------------------------------------------------------------------------------

    def _write(self, record: dict[str, Any]) -> None:
        assert self.out is not None
        self.out.write(json.dumps(record, sort_keys=True) + "\n")
        self.out.flush()

    def _act(self, index: int, action: str, planned: float | None, by: str) -> bool:
        """Inject or heal fault `index` now, recorded; whether it went well (a kind with nothing to heal: True)."""
        fault = self.faults[index]
        began = time.time()
        try:
            # the schedule's own actions end with the run (a campaign's command still running is killed then)
            inject, heal = fault_actions.actions(fault, self.context, self.stopping if by == "schedule" else None)
            done = inject() if action == "inject" else heal()
        except Exception as exc:  # noqa: BLE001 - a fault that cannot be applied is recorded, never a traceback
            done = (False, f"{exc.__class__.__name__}: {exc}")
        if done is None:
            return True
        ok, detail = done
        record = {
            "type": action,
            "fault": index,
            "what": fault.what,
            "target": fault.target(),
            "planned_at": planned,
            "started_at": began,
            "ended_at": time.time(),
            "late_s": None if planned is None else round(began - planned, 3),
            "ok": ok,
            "detail": detail,
            "by": by,
        }
        self._write(record)
        if action == "inject":
            self.injected[index] = not ok  # a fault that did not take needs no heal
            if not ok:
                self.failed.append(f"fault {fault.describe()}: not injected ({detail})")
        elif ok:
            self.injected[index] = True
        else:
            what = f"healing fault {fault.describe()} failed ({detail})"
            self.left.append(f"{self.run.label()}: {what}; it left {fault_actions.left(fault)}")
            self.injected[index] = True  # said once; the teardown does not try again
        return ok

    # --- the clock ----------------------------------------------------------------------------------------

    def told(self, start_at: float) -> None:
        """The run's common start (Lab.started): the first one the play gives is the faults' clock."""
        if self.start_at is None:
            self.start_at = start_at
            self.clock.set()

    def _serve(self) -> None:
        while not self.clock.wait(0.5):
            if self.stopping.is_set():
                return
        assert self.start_at is not None
        with self.lock:
            self._write({"type": "clock", "start_at": self.start_at, "told_at": time.time()})
        plan = sorted(
            [(self.start_at + f.at, "inject", i) for i, f in enumerate(self.faults)]
            + [(self.start_at + f.heal_at, "heal", i) for i, f in enumerate(self.faults) if f.heal_at is not None]
        )
        for when, action, index in plan:
            if self.stopping.wait(max(0.0, when - time.time())):
                return
            with self.lock:
                if action == "inject" or self.injected.get(index) is False:  # injected, not healed yet
                    self._act(index, action, when, "schedule")

    # --- around the run -----------------------------------------------------------------------------------

    def __enter__(self) -> Schedule:
        self.raw_dir.mkdir(parents=True, exist_ok=True)
        self.out = open(self.raw_dir / FAULTS_FILE, "a")  # noqa: SIM115 - closed in __exit__
        self._write(
            {
                "type": "start",
                "t": time.time(),
                "run_id": self.run.run_id,
                "hosts": self.hosts,
                "faults": [f.model_dump(mode="json") for f in self.faults],
            }
        )
        if isinstance(self.run.backend, CephBackend):
            self.health = _Health(self.run.backend, self.raw_dir / HEALTH_FILE)
        self.lab.started = self.told
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.lab.started = None
        self.stopping.set()
        self.thread.join()
        with self.lock:
            for index, healed in list(self.injected.items()):
                if not healed:  # still injected as the run ended: the teardown heals it
                    self._act(index, "heal", None, "teardown")
            if self.start_at is None:
                self._write({"type": "never", "t": time.time(), "why": "the run never reached its common start"})
                self.failed.append("its faults never fired: the run never reached its common start")
            for index in range(len(self.faults)):
                if self.start_at is not None and index not in self.injected:
                    self._write({"type": "never", "fault": index, "why": "the run ended before its time came"})
                    self.failed.append(
                        f"fault {self.faults[index].describe()}: never fired (the run's play ended "
                        f"{time.time() - self.start_at:.0f} s after its common start; move the fault earlier)"
                    )
            self._wait_healthy()
            self._write({"type": "end", "t": time.time(), "left": self.left})
        if self.out is not None:
            self.out.close()

    def failing(self, failed: dict[str, tuple[str, str]] | None) -> dict[str, tuple[str, str]] | None:
        """The run's failed hosts (runner.Result.failed_hosts; None: it did not start) and, on its other hosts, its
        faults' failure: a run whose fault was not injected or never fired measured no fault, so it is a failed run
        (no samples stored, tried again by the next call), never a clean faulted one."""
        if failed is None or not self.failed:
            return failed
        why = self.failed[0] + (f" (and {len(self.failed) - 1} more)" if len(self.failed) > 1 else "")
        return {**dict.fromkeys(self.hosts, ("faults", why)), **failed}

    def _wait_healthy(self) -> None:
        """Poll until the cluster is as healthy as before the first fault (at most HEALTH_WAIT), then stop."""
        if self.health is None:
            return
        first = min(
            (r["started_at"] for r in read_lines(self.raw_dir / FAULTS_FILE) if r.get("type") == "inject"), default=None
        )
        before = [r for r in self.health.records() if "health" in r and (first is None or r["t"] < first)]
        began, back = time.time(), None
        if before and first is not None:
            deadline = began + HEALTH_WAIT
            while back is None and time.time() < deadline:
                after = [r for r in self.health.records() if "health" in r and r["t"] > first]
                back = after[-1] if after and health_key(after[-1]) == health_key(before[-1]) else None
                if back is None:
                    time.sleep(1.0)
        self.health.stop()
        if not before or first is None:
            return
        as_before = health_text(before[-1])
        self._write({"type": "health", "before": as_before, "back": back is not None, "waited_s": time.time() - began})
        if back is None:
            now = [r for r in self.health.records() if "health" in r]
            state = health_text(now[-1]) if now else "unknown"
            self.left.append(
                f"{self.run.label()}: backend {self.run.backend.name}'s cluster is not as healthy as before its faults "
                f"({as_before}) {HEALTH_WAIT:g} s after the run: {state}"
            )
