"""One run of any kind with a host call through ClusterShell (iolab.drive.fanout's Engine, its docstring says the
path): every host's prepare and run in one call, the storage side's cache drop once they are ready, the common start,
a silent host probed, each host's reply into its outcome with its archives, a failed host's files packed.

    storage_side(inventory, variables, drop, env, calls) → (calls, StorageDrop or None)
    run_calls(engine, env, run_dirs, calls, timeout, storage, on_start) → {host: runner.HostOutcome}
    warm(engine, env, python, run_dirs, argv, target, timeout) → the hosts a warm-up command failed on, their outcomes
    intact(engine, env, python, outcomes, check)   the check after a faulted run, beside each host's files
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import tarfile
import time
from pathlib import PurePosixPath
from typing import Any

from ClusterShell.Event import EventHandler

from iolab.campaign.hosts import Inventory
from iolab.drive import runner
from iolab.drive.fanout import PROBE_S, SLACK, Engine, Reply
from iolab.shared.protocol import ARCHIVE_LINE, START_JSON, START_SUFFIX, STORAGE_DROP_JSON
from iolab.workloads.base import HostCall

# The page cache of the storage side's hosts (inventory group ceph_osd), by their system's python: they need not be
# iolab's hosts. Role drop_caches (storage.yml) runs the same argv.
PAGE_CACHE_DROP = ["python3", "-c", "import os; os.sync(); open('/proc/sys/vm/drop_caches', 'w').write('3')"]


class StorageDrop:
    """A run's storage side's cache drop, once every host is ready and before the start (where role drop_caches'
    storage.yml runs it on Ansible's route: between the prepare and the start): the page cache of each host of the
    inventory group ceph_osd, and the backend's Ceph OSDs (and MDS) from the run's first host, as a client
    (iolab.host.ceph_osds drop). What could not be dropped is recorded, not fatal to the run; the record, as the role
    writes it, goes beside every host's files (STORAGE_DROP_JSON)."""

    def __init__(self, group: list[str], ceph: tuple[str, list[str]] | None):
        self.group = group
        self.commands = [(host, PAGE_CACHE_DROP) for host in group] + ([ceph] if ceph else [])
        self.replies = [Reply() for _ in self.commands]
        self.left, self.go = len(self.commands), lambda: None

    def __call__(self, launch: Any, go: Any) -> None:
        """Engine.call's before_start: start every command; `go` (the start) once the last has ended."""
        self.go = go
        for index, (host, argv) in enumerate(self.commands):
            launch(host, argv, _Ended(self, index), SLACK)

    def ended(self) -> None:
        self.left -= 1
        if self.left == 0:
            self.go()

    def record(self) -> dict[str, Any]:
        """What was dropped where, as role drop_caches writes it: the hosts of group ceph_osd the drop reached
        (`dropped_on`) or not (`failed_on`), and the Ceph cluster's record (`ceph`, iolab.host.ceph_osds.drop's)."""
        record: dict[str, Any] = {}
        if self.group:
            replies = self.replies[: len(self.group)]
            record["dropped_on"] = [h for h, r in zip(self.group, replies, strict=True) if r.rc == 0]
            record["failed_on"] = [h for h, r in zip(self.group, replies, strict=True) if r.rc != 0]
            record.update(method="sync; echo 3 > /proc/sys/vm/drop_caches", group="ceph_osd")
        if len(self.commands) > len(self.group):
            reply = self.replies[-1]
            try:
                record["ceph"] = json.loads(reply.out[-1])
            except (IndexError, ValueError):
                said = (reply.err or [f"exit {reply.rc}" if reply.rc is not None else "no answer"])[-1]
                record["ceph"] = {"dropped": False, "error": f"iolab.host.ceph_osds drop gave no record: {said}"}
        return record


class _Ended(EventHandler):
    """One command of a StorageDrop: its output into its reply, its end told."""

    def __init__(self, drop: StorageDrop, index: int):
        self.drop, self.reply = drop, drop.replies[index]

    def ev_read(self, worker: Any, node: str, sname: str, msg: bytes) -> None:
        (self.reply.err if sname == "stderr" else self.reply.out).append(msg.decode(errors="replace"))

    def ev_hup(self, worker: Any, node: str, rc: int) -> None:
        self.reply.rc = rc

    def ev_close(self, worker: Any, timedout: bool) -> None:
        self.drop.ended()


def storage_side(
    inventory: Inventory, variables: dict[str, Any], drop: bool, env: list[str], calls: dict[str, HostCall]
) -> tuple[dict[str, HostCall], StorageDrop | None]:
    """A run's storage side on this route, as playbooks/run.yml gives it: every host's tool its backend's environment
    (`run_environment`: rbd's CEPH_CONF and CEPH_ARGS, paths), the run's first host the cluster whose OSDs it samples
    while the tool runs (IOLAB_CEPH, `run_ceph`); and the storage side's cache drop, where the run drops its caches
    (`drop`, and its kind's call reads storage). `variables`: the run's role variables with its backend's storage
    side (iolab.drive.execute.fan_vars); `env`: run_calls's."""
    if not calls:
        return calls, None
    ceph, first = variables.get("run_ceph"), next(iter(calls))
    more = {str(k): str(v) for k, v in variables.get("run_environment", {}).items()}
    calls = {
        h: dataclasses.replace(
            c, env={**c.env, **more, **({"IOLAB_CEPH": json.dumps(ceph)} if ceph and h == first else {})}
        )
        for h, c in calls.items()
    }
    group = list(inventory.groups.get("ceph_osd", ()))
    if not (drop and calls[first].storage_side and (group or ceph)):
        return calls, None
    python = calls[first].prepare[0]
    ceph_argv = [*env, python, "-m", "iolab.host.ceph_osds", "drop", "--cluster", json.dumps(ceph)] if ceph else None
    return calls, StorageDrop(group, (first, ceph_argv) if ceph_argv else None)


def run_calls(
    engine: Engine,
    env: list[str],
    run_dirs: dict[str, str],
    calls: dict[str, HostCall],
    timeout: float,
    storage: StorageDrop | None = None,
    on_start: Any = None,
    first: bool = False,
):
    """Run each host's call (iolab.kinds.hostcall) and return each host's outcome, its archives among them.
    `env`: `env NAME=VALUE ...` before each host-side command (the release's PYTHONPATH), the call's own environment
    after it; `storage`: the storage side's drop before the start (storage_side); `on_start(T)` as the start T is sent
    (a faulted run's clock: Lab.started, iolab.drive.injector). The calls' `first` calls run before them, every host
    or none (`first`: this is that round): a host they failed on does not run. The start file is the run's,
    beside the hosts' directories (RUNS/OWNER/HOST/RUN → RUNS/OWNER/RUN.start): one path for every host, so that one
    `touch` through the gateways reaches them all; `hostrun stop` removes it."""
    firsts = {h: c.first for h, c in calls.items() if c.first is not None}
    if firsts:
        done = run_calls(engine, env, run_dirs, firsts, timeout, None, on_start, first=True)
        failed = {h: o for h, o in done.items() if o.unreachable or o.archives}  # (a first call packs nothing)
        rest = {h: dataclasses.replace(c, first=None) for h, c in calls.items() if h not in failed}  # (made)
        return {**failed, **(run_calls(engine, env, run_dirs, rest, timeout, storage, on_start) if rest else {})}
    outcomes = {host: runner.HostOutcome(host, task=call.run_task) for host, call in calls.items()}
    run_dir = PurePosixPath(next(iter(run_dirs.values())))
    start_file = str(run_dir.parent.parent / f"{run_dir.name}{'-first' if first else ''}{START_SUFFIX}")
    commands = {
        h: [*env, *(f"{k}={v}" for k, v in c.env.items()), *c.run, "--start-when-told", start_file]
        + ["--before", json.dumps(c.prepare, ensure_ascii=False), "--", *c.tool]  # UTF-8: 2-4 bytes, not \uXXXX
        for h, c in calls.items()
    }
    limit = 2 * timeout + SLACK if timeout else None  # the prepare, then the run
    ran = engine.call(commands, limit, start_file, storage, on_start, together=first)
    # ssh exits 255 when it could not connect or lost the connection, and when the remote command died by a signal
    # (the OOM killer): a host that answers now is reachable, and the run's files are to be packed there. (A local
    # command's reply says the signal itself: Reply.signalled.)
    silent = [h for h, r in ran.items() if not r.reached and not r.timed_out and not r.dropped]
    if silent:
        probed = engine.call({h: ["true"] for h in silent}, PROBE_S)
        for host in silent:
            ran[host].died = probed[host].rc == 0
    beside = {STORAGE_DROP_JSON: storage.record()} if storage is not None and storage.left == 0 else {}
    for host, reply in ran.items():
        call = calls[host]
        _note(outcomes[host], reply, call.run_task if reply.ready is not None else call.prepare_task, beside)
    _pack_failed(engine, env, next(iter(calls.values())).prepare[0], run_dirs, outcomes)
    return outcomes


WARM_TASK = "Warm the cache with the campaign's warm_command"  # playbooks/run.yml's task, for a failure's record


def warm(
    engine: Engine, env: list[str], python: str, run_dirs: dict[str, str], argv: list[str], target: str, timeout: float
) -> dict[str, runner.HostOutcome]:
    """cache: warm's warm-up command on each host before its run, as playbooks/run.yml's first task runs it (the same
    argv): an argv, never through a shell, under hostrun in RUN/warm (the run's pack takes its files), in the
    backend's target directory, ended at the run's `timeout`. Returns the outcomes of the hosts it failed on (the
    failure recorded, the run's files packed): their run does not start."""
    commands = {
        h: [*env, python, "-m", "iolab.host.hostrun", "run", "--dir", f"{d}/warm", "--no-pack", "--profilers", ""]
        + ["--timeout", str(timeout), "--cwd", target, "--", *argv]
        for h, d in run_dirs.items()
    }
    failed = {}
    for host, reply in engine.call(commands, timeout + SLACK).items():
        if not (reply.reached and reply.rc == 0 and not reply.died):
            failed[host] = runner.HostOutcome(host, task=WARM_TASK)
            _note(failed[host], reply, WARM_TASK)
    _pack_failed(engine, env, python, run_dirs, failed)
    return failed


def intact(engine: Engine, env: list[str], python: str, outcomes: dict, check: dict[str, Any]) -> None:
    """After a faulted run, the check that the storage lost nothing (iolab.drive.injector.check_phase's variables
    `check`, as playbooks/intact.yml reads them): the data set verified against its manifest on the hosts that hold
    it (iolab.host.dataset verify), what it found beside each host's files (intact.json: {"dataset": …}, {"checked":
    false} where it was not checked). A problem it finds does not fail the run: iolab.parsers.faults counts it."""
    hosts = [h for h, o in outcomes.items() if not o.unreachable and o.archives]
    holding = [h for h in hosts if h in check["intact_dataset_hosts"]]
    root = check["intact_dataset_root"]
    verify = [*env, python, "-m", "iolab.host.dataset", "verify"]
    argvs = {h: [*verify, root or f"{check['intact_target']}/iolab-{h}/dataset", "--json"] for h in holding}
    said = engine.call(argvs, SLACK) if argvs else {}
    for host in hosts:
        reply = said.get(host)
        found: dict[str, Any] = {"checked": False}
        if reply is not None:
            try:
                found = json.loads(reply.out[-1])
            except (IndexError, ValueError):  # no record: what it said instead
                found = {"ok": False, "error": (reply.err or [reply.unanswered])[-1].strip()}
        outcomes[host].archives.append(_archive("intact.json", {"dataset": found}))


def _note(outcome: runner.HostOutcome, reply: Reply, task: str, beside: dict[str, Any] | None = None) -> bool:
    """One round's reply into the host's outcome; return whether the host answered. A command that failed is the
    run's failure, recorded (error.json) as playbooks/run.yml's rescue records it; the host stays in the batch.
    `beside`: more files (name: record) for a host that took the start, beside start.json."""
    outcome.task, outcome.ended = task, time.monotonic()
    if reply.dropped or reply.died:
        how = f"(signal {reply.signalled})" if reply.signalled else f"(ssh exit {reply.rc}) and the host answers"
        why = reply.dropped or (
            f"its command ended without an answer {how}: it died there "
            "(killed by a signal: the OOM killer?); what it left was ended and packed"
        )
        outcome.ok += 1
        outcome.archives.append(_error_archive({"task": task, "result": {"msg": why, "rc": reply.rc}}))
        return True
    if not reply.reached:
        outcome.unreachable = True
        if reply.timed_out:
            outcome.message = f"no answer within {SLACK:.0f} s past the run's timeout"
        else:
            outcome.message = reply.unanswered
        return False
    lines = []
    for line in reply.out:
        if line.startswith(ARCHIVE_LINE):
            outcome.archives.append(base64.b64decode(line[len(ARCHIVE_LINE) :]))
        else:
            lines.append(line)
    # Beside the run's files: which host every host waited for, and who was left out. Not for a run whose files stay
    # on the host for collect.yml (over $IOLAB_INLINE_MAX): an archive here would say they had come back.
    if reply.start and outcome.archives:
        for name, record in {START_JSON: reply.start, **(beside or {})}.items():
            outcome.archives.append(_archive(name, record))
    outcome.ok += 1
    if reply.rc != 0:
        result = {"rc": reply.rc, "msg": "non-zero return code", "stdout": "\n".join(lines), "stdout_lines": lines}
        result["stderr"] = "\n".join(reply.err)
        outcome.archives.append(_error_archive({"task": task, "result": result}))
    return True


def _error_archive(record: dict[str, Any]) -> bytes:
    """An archive holding error.json: the failed task's record, beside the run's files once unpacked."""
    return _archive("error.json", record)


def _archive(name: str, record: dict[str, Any]) -> bytes:
    """An archive holding one JSON file, put beside the run's files once unpacked."""
    data = json.dumps(record).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"./{name}")
        info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _pack_failed(engine: Engine, env: list[str], python: str, run_dirs: dict[str, str], outcomes: dict) -> None:
    """Pack the files of a host whose run failed before hostrun packed them (its prepare, say): they come back
    with the failure's record, and nothing of the run stays on the host (as the rescue's pack)."""
    hosts = [h for h, o in outcomes.items() if not o.unreachable and len(o.archives) == 1 and _failed_only(o)]
    if not hosts:
        return
    packed = engine.call({h: [*env, *_pack_argv(python, run_dirs[h])] for h in hosts}, SLACK)
    for host in hosts:
        _note(outcomes[host], packed[host], "Pack the run's files with the failure record")


def _failed_only(outcome: runner.HostOutcome) -> bool:
    """Whether the host's only archive is the failure's record (the run's files did not come back)."""
    with tarfile.open(fileobj=io.BytesIO(outcome.archives[0])) as tar:
        return tar.getnames() == ["./error.json"]


def _pack_argv(python: str, run_dir: str) -> list[str]:
    return [python, "-m", "iolab.host.hostrun", "pack", "--dir", run_dir]
