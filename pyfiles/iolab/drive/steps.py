"""The steps around a batch of runs (iolab.drive.execute.Step) done without an ansible-playbook, over the fan-out's
sessions (iolab.drive.fanout.Engine), where Ansible would do no more than one host call:

- provisioning (playbooks/setup.yml) on hosts where the lease found this release unpacked (Lab.released), which asks
  for no OS package (perf) nor provenance: roles/iolab_host would only look for the pinned Python packages the
  campaign needs (its defaults' lists, or the inventory's), so that look is made here, with the same program
  (iolab.host.pinned: DLIO's pin and Open MPI's mpirun too); a host that lacks one sends the step to Ansible after
  all, which installs it, as does a campaign that runs kv-cache.py (its source to install) or DLIO from a wheel;
- the tmpfs backend's mount and unmount (roles/storage_tmpfs is one task): the same argv
  (iolab.shared.calls.tmpfs), so the same checks and refusals in the same words; the local backend's check of its
  directory and its clearing at the end the same way (roles/storage_local, iolab.shared.calls.local); the rbd
  backend's too (roles/storage_rbd: its image made ready on the first host, run_once, iolab.shared.calls.rbd_image,
  then each host's work directory, iolab.shared.calls.rbd; the first host's failure is every host's, as a run_once
  task's is); the rbd_snapshot backend's the same way (roles/storage_rbd_snapshot: its snapshot made on the first
  host, iolab.shared.calls.rbd_snapshot_image, then mapped and mounted on each, iolab.shared.calls.rbd_snapshot);
  the cephfs, nfs and generic mount backends' mount and unmount (roles/storage_cephfs, storage_nfs and
  storage_mount; iolab.shared.calls.cephfs, nfs and fsmount), unless a host lacks the client's program or package:
  its call answers {"install": ...} and mounts nothing, and the step is Ansible's, which installs them and mounts;
  the s3 backend's check of the bucket, with the campaign's data set made on each host and uploaded by the first (as
  the role's run_once task did), and its keys removed at the end (roles/storage_s3, iolab.shared.calls.s3);
- the campaign's data set (playbooks/dataset.yml: roles/dataset_gen is one task, iolab.shared.calls.dataset's argv),
  with no time limit, as the play's task had none: generating a large data set takes what it takes.

Every other step stays a play (another backend's state, a host to provision, `data.gen`'s data set with its reports
to the controller): `calls` says None, and so does `play` when the packages' look finds one missing.

    calls(phase, hosts, released, extravars, hostvars) → {host: argv} ({}: nothing to run) | None (a play)
    play(engine, phase, calls, hosts, extravars, hostvars) → {host: runner.HostOutcome} | None (a play after all)
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from pathlib import Path
from typing import Any

import yaml

from iolab import paths
from iolab.drive import runner
from iolab.drive.fanout import Engine, Reply
from iolab.parsers import failure_message
from iolab.shared import calls as host_calls

STEP_TIMEOUT = 300.0  # s: a tmpfs's mount, or its unmount (this command's tools stopped, then umount tried for 10 s)
# A local backend's clearing removes its data set, and an rbd image's prefill writes it whole: each takes what it
# takes, as the role's task did (no limit; each Ceph command waits for the monitors for its connect timeout at most).
TIMEOUTS = {
    "setup.yml": STEP_TIMEOUT,
    "storage_tmpfs": STEP_TIMEOUT,
    "storage_local": None,
    "storage_rbd": None,
    "storage_rbd_snapshot": None,  # a new snapshot's load copies or makes its data set: what it takes, as the role did
    # ceph-fuse gives up on monitors that do not answer after its client_mount_timeout (300 s by default), then the
    # release: its stop (30 s) and umount's wait (20 s); the call's own refusal comes first
    "storage_cephfs": 400.0,
    "storage_sshfs": STEP_TIMEOUT,  # sshfs's connection (its ssh's timeouts), its stop (15 s), umount's (20 s)
    "storage_nfs": STEP_TIMEOUT,  # nfs-ls's (20 s), the FUSE client's start (30 s) and stop (15 s), umount's (20 s)
    "storage_mount": STEP_TIMEOUT,  # mount's own (a server that does not answer), umount's (20 s)
    "storage_s3": None,  # the data set made and uploaded: what it takes, as the role's tasks had no limit
    "dataset.yml": None,
}
# roles/iolab_host's switches and the package lists each one installs (main.yml's includes: dl.yml, kvcache.yml,
# dlio.yml).
PACKAGES = {
    "iolab_host_dl": ("iolab_host_dl_packages",),
    "iolab_host_tf": ("iolab_host_tf_packages",),
    "iolab_host_kvcache": ("iolab_host_kvcache_packages",),
    "iolab_host_dlio": ("iolab_host_dlio_packages", "iolab_host_tf_packages"),  # DLIO imports TensorFlow
}
TASKS = {  # the role task each step's call stands for, as a failure names it
    "setup.yml": "Look for the pinned Python packages in the host's virtualenv",
    "storage_tmpfs": "Mount the tmpfs, or unmount it, after its checks",
    "storage_local": "Check the backend's directory, or remove iolab's files from it",
    "storage_rbd": "Make the hosts' work directory, or remove iolab's files from it",
    "storage_rbd image": "Make the image ready on one host: created, as large as the backend, written whole once",
    "storage_rbd_snapshot": "Map and mount the snapshot, or unmount and unmap it, after its checks",
    "storage_rbd_snapshot image": "Make the snapshot (or the scratch image) if it is not there yet",
    "storage_cephfs": "Mount the file system, or unmount it, after its checks",
    "storage_sshfs": "Mount the directory, or unmount it, after its checks",
    "storage_nfs": "Mount the export, or unmount it, after its checks",
    "storage_mount": "Mount the file system, or unmount it, after its checks",
    "storage_s3": "Check the bucket (with the data set made and uploaded), or remove this host's keys",
    "dataset.yml": "Put the data set there, after its checks (kept when it is already there)",
}
# The backends whose state is one host call (their role's one task), and its argv.
STORAGE_CALLS = {
    "storage_tmpfs": host_calls.tmpfs,
    "storage_local": host_calls.local,
    "storage_rbd": host_calls.rbd,
    "storage_rbd_snapshot": host_calls.rbd_snapshot,
    "storage_cephfs": host_calls.cephfs,
    "storage_sshfs": host_calls.sshfs,
    "storage_nfs": host_calls.nfs,
    "storage_mount": host_calls.fsmount,
    "storage_s3": host_calls.s3,
}
# What the sshfs call is given of the serving host's inventory variables (its key's contents go on its stdin).
SERVING = ("ansible_host", "ansible_user", "ansible_port", "ansible_ssh_private_key_file")
# Those whose role first makes one call on one host (run_once), where the storage is put in place, and its argv.
STORAGE_ONCE = {"storage_rbd": host_calls.rbd_image, "storage_rbd_snapshot": host_calls.rbd_snapshot_image}


def calls(
    phase: runner.Phase,
    hosts: list[str],
    released: set[str],
    extravars: dict[str, Any],
    hostvars: dict[str, dict[str, Any]],
) -> dict[str, list[str]] | None:
    """Each host's argv for the step `phase` ({}: nothing to do on any host), or None: it is Ansible's to play."""
    variables = phase.vars
    python = extravars["iolab_python"]
    if phase.playbook == "setup.yml":
        if not set(hosts) <= released or variables.get("iolab_host_facts_dest"):
            return None
        if "perf" in variables.get("iolab_host_profilers", ()) or variables.get("iolab_host_mlperf_kvcache"):
            return None
        wanted = {h: _packages(variables, hostvars.get(h, {})) for h in hosts}
        if any(specs is None for specs in wanted.values()):
            return None
        return {h: [python, "-m", "iolab.host.pinned", *specs] for h, specs in wanted.items() if specs}
    if phase.playbook == "storage.yml" and variables.get("storage_role", "") in STORAGE_CALLS:
        return _storage_calls(phase, hosts, extravars, hostvars)
    if phase.playbook == "dataset.yml" and not variables.get("dataset_gen_report_dest"):
        return {h: host_calls.dataset(python, h, variables) for h in hosts}
    return None


def _storage_calls(
    phase: runner.Phase, hosts: list[str], extravars: dict[str, Any], hostvars: dict[str, dict[str, Any]]
) -> dict[str, list[str]] | None:
    """Each host's argv for a backend's storage step, with what the play would give its role: the role's defaults
    where the phase leaves one out (a stop's timeout, the FUSE client's pins), the host's inventory variables over
    them (storage_unmount_wait, a lab's own timeouts), the first host (a run_once task's:
    storage_s3's upload), the play's host count (a scratch rbd_snapshot maps on one only), how the inventory reaches
    sshfs's serving host. None (a play) where sshfs's key would go through a gateway, which passes stdin to one
    command only."""
    variables, role = phase.vars, phase.vars["storage_role"]
    runs = f"{extravars['iolab_host_dir']}/runs/{extravars['iolab_owner']}"
    plain = _plain_defaults(role)
    play: dict[str, Any] = {"storage_hosts": len(hosts)}
    if role == "storage_sshfs":
        serving = hostvars.get(str(variables.get("storage_sshfs_host")))
        if serving is not None and _serving_key(serving) and hostvars.get(hosts[0], {}).get("iolab_topology"):
            return None
        play["storage_sshfs_server"] = None if serving is None else {k: serving.get(k) for k in SERVING}
    call, python = STORAGE_CALLS[role], extravars["iolab_python"]
    inventory = {h: hostvars.get(h, {}) for h in hosts}  # above the role's defaults, as Ansible ranks them
    own = {h: plain | inventory[h] | variables | play | {"storage_first": h == hosts[0]} for h in hosts}
    return {h: call(python, h, own[h], f"{runs}/{h}") for h in hosts}


def play(
    engine: Engine,
    phase: runner.Phase,
    argvs: dict[str, list[str]],
    hosts: list[str],
    extravars: dict[str, Any],
    hostvars: dict[str, dict[str, Any]],
) -> dict[str, runner.HostOutcome] | None:
    """Run each host's argv under the release's PYTHONPATH: each host's outcome, as the play's would be; None when a
    host lacks a pinned package or a backend's client (the step is Ansible's, which installs it). A backend's call on
    one host first (STORAGE_ONCE), where its role runs one: its failure is every host's, and the others' calls are not
    made."""
    if not argvs:
        return {h: runner.HostOutcome(h, ok=1, ended=time.monotonic()) for h in hosts}
    env = ["env", f"PYTHONPATH={extravars['iolab_host_dir']}/releases/{extravars['iolab_release']}"]
    step = phase.vars["storage_role"] if phase.playbook == "storage.yml" else phase.playbook
    timeout = TIMEOUTS[step]
    if (once := _once(phase, hosts[0], extravars, hostvars)) is not None:
        replies = engine.call({hosts[0]: [*env, *once]}, timeout)
        first = _outcome(hosts[0], replies[hosts[0]], f"{step} image", timeout)
        if first.ok and _installs(phase, replies[hosts[0]]):
            return None
        if not first.ok:  # the other hosts are reachable, but have no image to use
            others = {h: dataclasses.replace(first, host=h, failed=True, unreachable=False) for h in hosts[1:]}
            return {hosts[0]: first, **others}
    stdin = _stdin(phase, argvs, hostvars)
    replies = engine.call({h: [*env, *argv] for h, argv in argvs.items()}, timeout, stdin=stdin)
    outcomes = {h: runner.HostOutcome(h, ok=1, ended=time.monotonic()) for h in hosts}
    for host, reply in replies.items():
        outcomes[host] = _outcome(host, reply, step, timeout)
        if outcomes[host].ok and _installs(phase, reply):
            return None
    return outcomes


def _stdin(
    phase: runner.Phase, argvs: dict[str, list[str]], hostvars: dict[str, dict[str, Any]]
) -> dict[str, bytes] | None:
    """What each host's call reads on its stdin: the sshfs serving host's login key, read here (the controller's
    file, as the role's copy read it), where its call asks for it."""
    if not any("--key-on-stdin" in argv for argv in argvs.values()):
        return None
    key = Path(str(_serving_key(hostvars[str(phase.vars["storage_sshfs_host"])]))).expanduser().read_bytes()
    return {h: key for h, argv in argvs.items() if "--key-on-stdin" in argv}


def _serving_key(serving: dict[str, Any]) -> str:
    return str(serving.get("ansible_ssh_private_key_file") or "")


def _installs(phase: runner.Phase, reply: Reply) -> bool:
    """Whether a host's call answered that it lacks what Ansible installs: a pinned package (setup.yml's look, a list
    of them), a backend's client ({"install": ...})."""
    said = json.loads(reply.out[-1]) if reply.out else None
    return bool(said) if phase.playbook == "setup.yml" else isinstance(said, dict) and "install" in said


def _once(
    phase: runner.Phase, host: str, extravars: dict[str, Any], hostvars: dict[str, dict[str, Any]]
) -> list[str] | None:
    """The argv of the backend's call on its first host, where its state is being put in place; else None: with the
    role's defaults and the host's inventory variables, as _storage_calls; a new snapshot links a directory for each
    of the inventory's hosts (the role's default: groups['all'])."""
    role = phase.vars.get("storage_role", "") if phase.playbook == "storage.yml" else ""
    if role not in STORAGE_ONCE or phase.vars[f"{role}_state"] not in ("mounted", "kept"):
        return None
    inventory = hostvars.get(host, {}) | {f"{role}_hosts": list(hostvars)}  # as _storage_calls ranks them
    return STORAGE_ONCE[role](extravars["iolab_python"], host, _plain_defaults(role) | inventory | phase.vars)


def _outcome(host: str, reply: Reply, task: str, timeout: float | None) -> runner.HostOutcome:
    """A host's call's reply as the play's outcome of its task would be."""
    outcome = runner.HostOutcome(host, task=TASKS[task], ended=time.monotonic())
    if reply.timed_out:  # as a task that hangs fails the play's host (its teardown is tried after)
        outcome.failed, outcome.message = True, f"no answer within {timeout or 0:.0f} s"
    elif not reply.reached:
        outcome.unreachable = True
        outcome.message = reply.unanswered
    elif reply.rc != 0:
        outcome.failed = True
        said = {"rc": reply.rc, "msg": "non-zero return code", "stderr": "\n".join(reply.err)}
        outcome.message = failure_message(said)
    else:
        outcome.ok = 1
    return outcome


def _packages(variables: dict[str, Any], hostvars: dict[str, Any]) -> list[str] | None:
    """The pinned packages the setup step's variables ask for on a host: the role's lists, or its inventory's; for
    DLIO, its own pin and Open MPI's mpirun too (iolab.host.pinned's --command). None where a look cannot say: DLIO
    from a wheel or a URL (roles/iolab_host's tasks/dlio.yml looks, and installs it)."""
    defaults = _role_defaults("iolab_host")
    names = [lst for switch, lists in PACKAGES.items() if variables.get(switch) for lst in lists]
    if "py-spy" in variables.get("iolab_host_profilers", ()):
        names.append("iolab_host_py_spy_packages")
    specs = [str(spec) for name in names for spec in hostvars.get(name, defaults[name])]
    if not variables.get("iolab_host_dlio"):
        return specs
    dlio = str(variables.get("iolab_host_dlio_requirement", defaults["iolab_host_dlio_requirement"]))
    if "==" not in dlio or "/" in dlio:
        return None
    return [*specs, dlio, "--command=mpirun"]  # (iolab.host.pinned's flag for a program on PATH)


def _plain_defaults(role: str) -> dict[str, Any]:
    """The role's defaults that are values, not templates (a per-host path is the call's to make)."""
    return {k: v for k, v in _role_defaults(role).items() if not (isinstance(v, str) and "{{" in v)}


@functools.cache
def _role_defaults(role: str) -> dict[str, Any]:
    return dict(yaml.safe_load((paths.ROLES / role / "defaults" / "main.yml").read_text()) or {})
