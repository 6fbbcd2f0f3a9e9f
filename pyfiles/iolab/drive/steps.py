"""The steps around a batch of runs (iolab.drive.execute.Step) done without an ansible-playbook, over the fan-out's
sessions (iolab.drive.fanout.Engine), where Ansible would do no more than one host call:

- provisioning (playbooks/setup.yml) on hosts where the lease found this release unpacked (Lab.released) and the
  campaign asks for nothing the release does not bring (roles/iolab_host's includes: the deep-learning stack, the
  KV-cache packages, perf, py-spy, the provenance): the role would skip every task there, so nothing runs;
- the tmpfs backend's mount and unmount (roles/storage_tmpfs is one task): the same argv
  (iolab.backends.tmpfs.host_call), so the same checks and refusals in the same words.

Every other step stays a play (a data set, another backend's state, a host to provision): `calls` says None.

    calls(phase, hosts, released, extravars) → {host: argv} ({}: nothing to run) | None (a play)
    play(engine, calls, hosts, extravars) → {host: runner.HostOutcome}
"""

from __future__ import annotations

import time
from typing import Any

from iolab.backends import tmpfs
from iolab.drive import runner
from iolab.drive.fanout import Engine
from iolab.parsers import failure_message

STEP_TIMEOUT = 300.0  # s: a tmpfs's mount, or its unmount (this command's tools stopped, then umount tried for 10 s)
# What roles/iolab_host installs beyond the release, asked for by these setup variables (its main.yml's includes).
PROVISIONS = ("iolab_host_dl", "iolab_host_tf", "iolab_host_kvcache", "iolab_host_facts_dest")
INSTALLED_PROFILERS = {"perf", "py-spy"}
TASK = "Mount the tmpfs, or unmount it, after its checks"  # roles/storage_tmpfs's task, as a failure names it


def calls(
    phase: runner.Phase, hosts: list[str], released: set[str], extravars: dict[str, Any]
) -> dict[str, list[str]] | None:
    """Each host's argv for the step `phase` ({}: nothing to do on any host), or None: it is Ansible's to play."""
    variables = phase.vars
    if phase.playbook == "setup.yml":
        wanted = any(variables.get(k) for k in PROVISIONS)
        wanted = wanted or bool(INSTALLED_PROFILERS & set(variables.get("iolab_host_profilers", ())))
        return {} if set(hosts) <= released and not wanted else None
    if phase.playbook == "storage.yml" and variables.get("storage_role") == "storage_tmpfs":
        python, runs = extravars["iolab_python"], f"{extravars['iolab_host_dir']}/runs/{extravars['iolab_owner']}"
        return {h: tmpfs.host_call(python, h, variables, f"{runs}/{h}") for h in hosts}
    return None


def play(
    engine: Engine, argvs: dict[str, list[str]], hosts: list[str], extravars: dict[str, Any]
) -> dict[str, runner.HostOutcome]:
    """Run each host's argv under the release's PYTHONPATH; each host's outcome, as the play's would be."""
    if not argvs:
        return {h: runner.HostOutcome(h, ok=1, ended=time.monotonic()) for h in hosts}
    env = ["env", f"PYTHONPATH={extravars['iolab_host_dir']}/releases/{extravars['iolab_release']}"]
    replies = engine.call({h: [*env, *argv] for h, argv in argvs.items()}, STEP_TIMEOUT)
    outcomes = {}
    for host, reply in replies.items():
        outcome = outcomes[host] = runner.HostOutcome(host, task=TASK, ended=time.monotonic())
        if reply.timed_out:  # as a task that hangs fails the play's host (its teardown is tried after)
            outcome.failed, outcome.message = True, f"no answer within {STEP_TIMEOUT:.0f} s"
        elif not reply.reached:
            outcome.unreachable = True
            outcome.message = reply.err[-1] if reply.err else f"ssh ended without an answer (exit {reply.rc})"
        elif reply.rc != 0:
            outcome.failed = True
            outcome.message = failure_message(
                {"rc": reply.rc, "msg": "non-zero return code", "stderr": "\n".join(reply.err)}
            )
        else:
            outcome.ok = 1
    return outcomes
