"""One run of any kind with a host call through ClusterShell (iolab.drive.fanout's Engine, its docstring says the
path): every host's prepare and run in one call, the common start, a silent host probed, each host's reply into its
outcome with its archives, a failed host's files packed.

    run_calls(engine, env, run_dirs, calls, timeout) → {host: runner.HostOutcome}
"""

from __future__ import annotations

import base64
import io
import json
import tarfile
import time
from pathlib import PurePosixPath
from typing import Any

from iolab.drive import runner
from iolab.drive.fanout import PROBE_S, SLACK, Engine, Reply
from iolab.shared.protocol import ARCHIVE_LINE, START_JSON, START_SUFFIX
from iolab.workloads.base import HostCall


def run_calls(engine: Engine, env: list[str], run_dirs: dict[str, str], calls: dict[str, HostCall], timeout: float):
    """Run each host's call (iolab.workloads.hostcall) and return each host's outcome, its archives among them.
    `env`: `env NAME=VALUE ...` before each host-side command (the release's PYTHONPATH), the call's own environment
    after it. The start file is the run's, beside the hosts' directories (RUNS/OWNER/HOST/RUN → RUNS/OWNER/RUN.start):
    one path for every host, so that one `touch` through the gateways reaches them all; `hostrun stop` removes it."""
    outcomes = {host: runner.HostOutcome(host, task=call.run_task) for host, call in calls.items()}
    run_dir = PurePosixPath(next(iter(run_dirs.values())))
    start_file = str(run_dir.parent.parent / f"{run_dir.name}{START_SUFFIX}")
    commands = {
        h: [*env, *(f"{k}={v}" for k, v in c.env.items()), *c.run, "--start-when-told", start_file]
        + ["--before", json.dumps(c.prepare), "--", *c.tool]
        for h, c in calls.items()
    }
    ran = engine.call(commands, 2 * timeout + SLACK if timeout else None, start_file)  # the prepare, then the run
    # ssh exits 255 when it could not connect or lost the connection, and when the remote command died by a signal
    # (the OOM killer): a host that answers now is reachable, and the run's files are to be packed there. (A local
    # command's reply says the signal itself: Reply.signalled.)
    silent = [h for h, r in ran.items() if not r.reached and not r.timed_out and not r.dropped]
    if silent:
        probed = engine.call({h: ["true"] for h in silent}, PROBE_S)
        for host in silent:
            ran[host].died = probed[host].rc == 0
    for host, reply in ran.items():
        call = calls[host]
        _note(outcomes[host], reply, call.run_task if reply.ready is not None else call.prepare_task)
    _pack_failed(engine, env, next(iter(calls.values())).prepare[0], run_dirs, outcomes)
    return outcomes


def _note(outcome: runner.HostOutcome, reply: Reply, task: str) -> bool:
    """One round's reply into the host's outcome; return whether the host answered. A command that failed is the
    run's failure, recorded (error.json) as playbooks/run.yml's rescue records it; the host stays in the batch."""
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
        outcome.archives.append(_archive(START_JSON, reply.start))
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
