"""The run path through ClusterShell: hand each host its run, start every host at one time, bring its files back.

Ansible changes the hosts (provisioning, the mounts, the data set, teardown: playbooks/); a run that only
starts iolab.host.hostrun on each host goes through ClusterShell's task/worker API instead, which pays no
playbook, module or fact machinery per host: one ssh session per host per round, `FANOUT` at a time, through
the control sockets Ansible opened (the same ssh options: ansible.cfg's ssh_args, the inventory's
ansible_ssh_common_args, and each host's address, user, port and key, written as one ssh_config). With a
ClusterShell topology file (the inventory variable `iolab_topology`; its root is this controller's short host
name), the sessions go through its gateways (tree mode: ClusterShell's gateway, `python -m ClusterShell.Gateway`,
runs on each gateway under the python the inventory variable `iolab_gateway_python` names, default python3, which
must have ClusterShell; it reads the same ssh_config, at the same path: a file system the gateway shares, or a copy).

A host that is this machine (`ansible_connection: local`: localhost, the default inventory) takes the same argv on
the same route, started here without ssh (iolab.drive.local_worker: ClusterShell's local execution, under the same
Engine and event handler); its reply and its record are an ssh host's.

A run is one call per host: `hostrun run --start-when-told START_FILE --before PREPARE` does the prepare (its
kind's, iolab.kinds.hostcall: fio's iolab.kinds.fio.host sizes, lays out and drops the caches, a loader's
iolab.host.prepare checks the data set, makes the run directory and drops the caches), says it is ready, and waits
for the start time; once every host has said so (or ended), the controller writes T = now + `margin` (sized to the
host count) to each ready host's session (through gateways, whose channel passes stdin to one command only, it runs
one `touch -d @T START_FILE` on all of them instead), and each host waits for T on its own clock and records its
start skew and when T came. Each host's archive comes back in its output; a failed run's record (error.json, as
playbooks/run.yml's rescue writes it) is added on the controller. The remote command is an argv joined with
shlex.join here: no value reaches a shell otherwise. That run is iolab.drive.fanout_run's; this module holds the
sessions (Engine), the ssh_config and topology, and what may fan out (`refusal`).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ClusterShell.Event import EventHandler
from ClusterShell.NodeSet import NodeSet
from ClusterShell.Propagation import RouteResolvingError
from ClusterShell.Task import Task, task_self

from iolab.campaign.hosts import Inventory
from iolab.drive import reach, runner
from iolab.drive.local_worker import LocalWorker
from iolab.kinds import hostcall
from iolab.shared.protocol import READY_LINE

FANOUT = 256  # ssh sessions (or gateway channels) open at once
START_LEAD = 0.05  # s: the least notice of the common start (the start line's way to a ready host)
START_PER_HOST = 0.002  # s of notice per host: the start line is written to each host's session in turn
TREE_PER_HOST = 0.01  # s of notice per host through gateways: the gateway's ssh session to each for `touch`
SLACK = 120.0  # s past a run's timeout (and its start) after which a host that has not answered is given up
PROBE_S = 20.0  # s a host whose command ended without an answer has to answer `true`: then the command died there
# Inventory variables beside those the ssh_config says (iolab.drive.reach) that change how
# Ansible reaches or runs on a host (a connection other than ssh or local, become, a password, extra ssh
# arguments, another ssh or shell) is run through Ansible (`refusal`).
_ANSIBLES = (
    "ansible_become",
    "ansible_password",
    "ansible_ssh_pass",
    "ansible_ssh_extra_args",
    "ansible_ssh_args",
    "ansible_ssh_executable",
    "ansible_shell_type",
    "ansible_shell_executable",
    "ansible_sftp_extra_args",
)


def margin(hosts: int, tree: bool = False) -> float:
    """Seconds between sending the start time to `hosts` ready hosts and the start itself: on the open sessions,
    or through gateways (`tree`) as the start file's `touch`, which each gateway runs on its hosts."""
    return START_LEAD + (TREE_PER_HOST if tree else START_PER_HOST) * hosts


def refusal(inventory: Inventory | None, hosts: list[str], variables: dict[str, Any]) -> str | None:
    """Why this run goes through Ansible rather than here; None when it can fan out here. The runs of a kind with a
    host call (iolab.kinds.hostcall.KINDS: fio, the loaders (reader s3 too), metadata, calibrate, kvcache, S3
    objects, checkpoint, replay, DLIO) come here, with nothing Ansible must do around the tool: no job file or trace to
    copy (one over workloads.base.INLINE_TEXT: hostcall.Kind.copied); every
    host reached by ssh as this module says it, or this machine itself (`ansible_connection: local`) — the storage
    side's hosts too (group ceph_osd), whose caches are dropped here (iolab.drive.fanout_run); become, other
    connection variables and the run role's own variables set in the inventory (e.g. bench_dlio_ssh_key) stay
    Ansible's to apply. An s3 backend's runs carry no secret: its connection names where the keys
    are on the host; an rbd backend's environment names the cluster's files, not their contents."""
    if inventory is None:  # a stand-in lab of the unit tests plays every phase itself
        return "no inventory to reach the hosts by"
    role = variables.get("run_role")
    if role not in hostcall.KINDS:
        return f"{role} runs through Ansible"
    kind, given = hostcall.KINDS[str(role)], hostcall.kind_vars(variables)
    if kind.copied and (copied := kind.copied(given)):  # a job file or trace over INLINE_TEXT
        return copied
    unknown = sorted(f"{role}_{k}" for k in given if k not in kind.names)
    if unknown:
        return f"a run with {', '.join(unknown)} runs through Ansible"
    reached = [*hosts, *(h for h in inventory.groups.get("ceph_osd", []) if h not in hosts)]
    for host in reached:
        hostvars = inventory.hostvars.get(host, {})
        other = sorted(k for k in hostvars if k.startswith((*_ANSIBLES, f"{role}_")))
        if hostvars.get("ansible_connection", "ssh") not in ("ssh", "smart", "local"):
            other.append(f"ansible_connection: {hostvars['ansible_connection']}")
        if other:
            return f"{host}'s {', '.join(other)} is Ansible's to apply"
    common = {
        str(inventory.hostvars.get(h, {}).get("ansible_ssh_common_args", ""))
        for h in reached
        if not is_local(inventory, h)
    }
    if len(common) > 1:  # (one topology for all: iolab.run.cli checks it with the hosts, reach.topology)
        return "the hosts differ in ansible_ssh_common_args"
    return None


def is_local(inventory: Inventory, host: str) -> bool:
    """Whether Ansible reaches `host` without ssh (`ansible_connection: local`): the fan-out starts its command here."""
    return inventory.hostvars.get(host, {}).get("ansible_connection") == "local"


class Reply:
    """What one host's command gave: its exit status (None: no answer), its output lines and its error lines;
    when it said it was ready (READY_LINE), and the worker that reaches it (over ssh, or here: `local`)."""

    def __init__(self, local: bool = False) -> None:
        self.local = local
        self.signalled: int | None = None  # a local command's: the signal that ended it
        self.rc: int | None = None
        self.out: list[str] = []
        self.err: list[str] = []
        self.timed_out = False
        self.ready: float | None = None
        self.worker: Any = None
        self.dropped: str | None = None  # why the run started without this host (not ready in time)
        self.start: dict[str, Any] | None = None  # how the common start went, for a host that took it
        self.died = False  # ended without an answer, and answered a probe after: its command died there

    @property
    def unanswered(self) -> str:
        """Why a command that did not run there gave no answer: ssh's last line, or its exit status."""
        return self.err[-1] if self.err else f"ssh ended without an answer (exit {self.rc})"

    @property
    def reached(self) -> bool:
        """Whether the command ran there: ssh exits 255 when it could not connect, or lost the connection."""
        return self.rc is not None and (self.local or self.rc != 255)

    def end(self) -> None:
        """End the command: its session (hostrun there stops its tool), or here SIGTERM, which does the same."""
        if self.local:
            self.worker.end()
        else:
            self.worker.abort()


@dataclasses.dataclass(frozen=True)
class Hooks:
    """What Engine.call adds around the start: `before_start(launch, go)` once every host is ready, `on_start(T)` as
    the start T is sent, `together` (every host starts, or none); and how a command is started on a host in this
    round's task (`launch`, Engine.launch's)."""

    before_start: Callable[[Callable[..., Any], Callable[[], None]], None] | None = None
    on_start: Callable[[float], None] | None = None
    together: bool = False
    launch: Callable[..., Any] | None = None


class _Collect(EventHandler):
    """Each host's reply; with `start_file`, the common start sent to every ready host once none is left to wait
    for (each has said it is ready, or ended): on its stdin, or through gateways (`tree`) as the start file's
    time, by one `touch` to all of them."""

    def __init__(
        self,
        task: Task,
        replies: dict[str, Reply],
        start_file: str | None,
        tree: bool,
        wait: float = reach.READY_WAIT,
        hooks: Hooks = Hooks(),
    ):
        self.task, self.replies, self.wait = task, replies, wait  # wait: the least bound on the wait (reach.READY_WAIT)
        self.hooks = hooks
        self.gateways: dict[str, Reply] = {}  # what a gateway said of itself (its channel's errors)
        self.start_file, self.tree = start_file, tree
        self.waiting = start_file is not None  # until the start is sent
        self.called = time.time()
        self.timer: Any = None  # the bound on the wait for the hosts not ready yet
        self.start: dict[str, Any] = {}  # how the start went: when, who was waited for, who was left out

    def ev_read(self, worker: Any, node: str, sname: str, msg: bytes) -> None:
        reply = self.replies.get(str(node)) or self.gateways.setdefault(str(node), Reply())  # a gateway's own
        line = msg.decode(errors="replace")
        if self.waiting and sname != "stderr" and line.startswith(READY_LINE) and str(node) in self.replies:
            reply.ready = time.time()
            self._start()
            return
        (reply.err if sname == "stderr" else reply.out).append(line)

    def ev_hup(self, worker: Any, node: str, rc: int) -> None:
        if str(node) in self.replies:
            reply = self.replies[str(node)]
            reply.rc = rc
            reply.signalled = getattr(worker, "signalled", None)  # a LocalWorker's: its command died here
            reply.died = reply.signalled is not None
            self._start()

    def ev_close(self, worker: Any, timedout: bool) -> None:
        if timedout:
            for node in worker.iter_keys_timeout():
                self.replies[str(node)].timed_out = True

    def ev_timer(self, timer: Any) -> None:
        """The bound passed with hosts still not ready: start without them (their sessions ended, so each one's
        hostrun stops its prepare), and say why on each."""
        ready = [r.ready for r in self.replies.values() if r.ready is not None and r.rc is None]
        if not self.waiting or not ready:  # none ready now: nothing to start, the rest end on their own
            return
        for reply in self.replies.values():
            if reply.ready is None and reply.rc is None:
                reply.dropped = (
                    f"not ready {time.time() - max(ready):.0f} s after the other {len(ready)} host(s) were "
                    f"(their slowest took {max(ready) - self.called:.0f} s): the run started without it"
                )
                reply.end()
        self._start(bounded=True)

    def _start(self, bounded: bool = False) -> None:
        if not self.waiting:
            return
        pending = [r for r in self.replies.values() if r.ready is None and r.rc is None and not r.dropped]
        ready = {h: r for h, r in self.replies.items() if r.ready is not None and r.rc is None}
        if pending and not bounded:
            if ready:  # every host that is done or ready waits at most the bound for the rest
                latest = max(r.ready for r in ready.values() if r.ready is not None)
                bound = max(self.wait, latest - self.called)
                if self.timer is not None:
                    self.timer.invalidate()
                self.timer = self.task.timer(max(0.0, latest + bound - time.time()), handler=self)
            return
        self.waiting = False
        if self.timer is not None:
            self.timer.invalidate()
        if not ready:
            return
        if self.hooks.together and (gone := [h for h in self.replies if h not in ready]):  # none starts: each told why
            said = " ".join(self.replies[gone[0]].err[-1:]).strip() or "it did not get ready"
            for reply in ready.values():
                reply.dropped = f"not started: every host starts or none, and {gone[0]} could not ({said})"
                reply.end()
            return
        if self.hooks.before_start is not None:  # then the start, once what it started has ended
            assert self.hooks.launch is not None  # (Engine._serve's)
            self.hooks.before_start(self.hooks.launch, self._send)
            return
        self._send()

    def _send(self) -> None:
        """Send the common start to every host still ready."""
        ready = {h: r for h, r in self.replies.items() if r.ready is not None and r.rc is None}
        if not ready:
            return
        start_at = time.time() + margin(len(ready), self.tree)
        last = max(ready, key=lambda h: ready[h].ready or 0.0)
        self.start = {
            "start_at": start_at,
            "waited_for": last,  # the host every other one waited for: the last to be ready
            "wait_s": (ready[last].ready or start_at) - min(r.ready or start_at for r in ready.values()),
            "without": sorted(h for h, r in self.replies.items() if r.dropped),
        }
        for reply in ready.values():
            reply.start = self.start
        if self.hooks.on_start is not None:
            self.hooks.on_start(start_at)
        if not self.tree:
            for reply in ready.values():
                reply.worker.write(f"{start_at!r}\n".encode())
            return
        touch = shlex.join(["touch", "-d", f"@{start_at!r}", str(self.start_file)])
        self.task.shell(touch, nodes=NodeSet.fromlist(list(ready)), handler=_Said(self.replies), tree=True)


class _Said(EventHandler):
    """The start file's `touch` through gateways: what went wrong, to each host's reply (the host then waits
    for the run's timeout)."""

    def __init__(self, replies: dict[str, Reply]):
        self.replies = replies

    def ev_read(self, worker: Any, node: str, sname: str, msg: bytes) -> None:
        if str(node) in self.replies:
            self.replies[str(node)].err.append(msg.decode(errors="replace"))

    def ev_hup(self, worker: Any, node: str, rc: int) -> None:
        if rc != 0 and str(node) in self.replies:
            self.replies[str(node)].err.append(f"the start could not be sent (touch exited {rc})")


class Engine:
    """ClusterShell for one batch of runs on `hosts`: its ssh_config (and topology) in a directory of its own."""

    def __init__(self, inventory: Inventory, hosts: list[str], console: Any):
        self.console = console
        self.private = Path(tempfile.mkdtemp(prefix="iolab-fanout-"))
        config = self.private / "ssh_config"
        config.write_text(reach.ssh_config(inventory, list(inventory.hosts)))  # a gateway need not run anything
        self.options = reach.ssh_options(inventory, hosts, config)
        hostvars = inventory.hostvars.get(hosts[0], {}) if hosts else {}
        self.topology = str(hostvars.get("iolab_topology", ""))
        # The python that runs ClusterShell's gateway on each gateway (ClusterShell reads it from the environment).
        self.gateway_python = str(hostvars.get("iolab_gateway_python", "python3"))
        self.ready_wait = reach.ready_wait(inventory, hosts) if hosts else reach.READY_WAIT
        self.local = {h for h in inventory.hosts if is_local(inventory, h)}

    def close(self) -> None:
        for path in self.private.iterdir():
            path.unlink()
        self.private.rmdir()

    def call(
        self,
        commands: dict[str, list[str]],
        timeout: float | None,
        start_file: str | None = None,
        before_start: Callable[[Callable[..., Any], Callable[[], None]], None] | None = None,
        on_start: Callable[[float], None] | None = None,
        together: bool = False,
        stdin: dict[str, bytes] | None = None,
    ) -> dict[str, Reply]:
        """Run each host's argv there (joined with shlex.join for its login shell), FANOUT at once; return what
        each gave. `start_file`: the commands say when they are ready (hostrun run --start-when-told
        START_FILE) and are sent the common start; `before_start(launch, go)` first, once every host is ready: it
        may start commands (`launch(host, argv, handler, timeout)`, Engine.launch) and calls `go()` once they have
        ended (iolab.drive.fanout_run's storage side); `on_start(T)` as the start T is sent (a faulted run's clock,
        iolab.drive.injector); `together`: every host starts, or none (a host that ended or was left out before the
        start stops the others, each told why in its reply's `dropped`). Ctrl-C or SIGTERM ends every command (each
        host's hostrun then stops its tool, as when an Ansible task goes away: a local one told by SIGTERM, the ssh
        sessions cut once the local commands have ended) and is raised once they have ended. `stdin`: what a host's
        command reads on its stdin, then its end (a secret that must be in no argv: sshfs's key)."""
        replies = {host: Reply(host in self.local) for host in commands}
        box: dict[str, Any] = {}
        args = (commands, timeout, replies, box, start_file, Hooks(before_start, on_start, together), stdin or {})
        thread = threading.Thread(target=self._serve, args=args, daemon=True)
        with runner.CtrlC(True, self.console) as ctrl:
            thread.start()
            while thread.is_alive():
                thread.join(0.1)
                if ctrl.pressed and "task" in box and not box.get("aborted"):
                    box["aborted"], told = True, set()
                for host, reply in replies.items() if box.get("aborted") is True else ():
                    if reply.local and host not in told and reply.rc is None and reply.worker.end():
                        told.add(host)  # (a command not started yet is told once it is)
                if box.get("aborted") is True and not any(r.local and r.rc is None for r in replies.values()):
                    box["aborted"] = "sessions"  # the local commands have ended: the ssh sessions are cut
                    box["task"].abort(kill=True)
        if "error" in box:
            raise box["error"]
        return replies

    def launch(self, task: Task, host: str, argv: list[str], handler: EventHandler, timeout: float | None) -> Any:
        """Start `argv` on `host` in `task`, its events to `handler`; its worker."""
        if host in self.local:  # this machine: the argv as it is, no ssh and no shell
            worker = LocalWorker(host, argv, handler, timeout)
            task.schedule(worker)
            return worker
        return task.shell(shlex.join(argv), nodes=host, handler=handler, timeout=timeout, tree=bool(self.topology))

    def _serve(
        self,
        commands: dict[str, list[str]],
        timeout: float | None,
        replies: dict[str, Reply],
        box: dict,
        start_file: str | None,
        hooks: Hooks,
        stdin: dict[str, bytes],
    ) -> None:
        try:
            task: Task = task_self()
            box["task"] = task
            task.set_info("fanout", FANOUT)
            task.set_info("ssh_options", self.options)
            task.set_info("connect_timeout", 0)  # the ssh_config's, per host
            for key in ("stderr", "stdout_msgtree", "stderr_msgtree"):
                task.set_default(key, key == "stderr")
                task.set_info(f"tree_default:{key}", key == "stderr")
            if self.topology:
                os.environ["CLUSTERSHELL_GW_PYTHON_EXECUTABLE"] = self.gateway_python
                task.load_topology(self.topology)
            hooks = dataclasses.replace(hooks, launch=lambda *args: self.launch(task, *args))
            handler = _Collect(task, replies, start_file, bool(self.topology), self.ready_wait, hooks)
            for host, argv in commands.items():
                replies[host].worker = self.launch(task, host, argv, handler, timeout)
                if host in stdin:  # (buffered until the command's pipe is open)
                    replies[host].worker.write(stdin[host])
                    replies[host].worker.set_write_eof()
            try:
                task.run()
            except RouteResolvingError as exc:  # every gateway to a host was lost: the hosts not answered are
                handler.gateways.setdefault("(none left)", Reply()).err.append(str(exc))
            said = [f"through gateway {g}: {r.err[-1]}" for g, r in handler.gateways.items() if r.err]
            for reply in replies.values():
                if not reply.reached and not reply.err:
                    reply.err = said[-1:]
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            box["error"] = exc
