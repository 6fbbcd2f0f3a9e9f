"""A fan-out session to a host that is this machine (`ansible_connection: local`): ClusterShell's local execution
(an ExecWorker, whose events name the host as an ssh worker's do), so that iolab.drive.fanout's Engine and its event
handler serve local and ssh hosts alike.

Where ssh would carry the command, this worker starts the argv itself, as it is (no shell: ClusterShell runs a list
without one), under `setsid` so that it is in a session of its own (a Ctrl-C at the terminal reaches this controller
only, as it reaches the ssh client only; `setsid` execs the command in place, since ClusterShell's child is not a
process group leader, so the command's parent is this controller, whose death it notices as it notices sshd's).
What the loss of an ssh session does to the host's hostrun (it stops its tool, records and packs), `end` does by
SIGTERM (iolab.host.watch stops the tool on it); the command then ends on its own and its reply comes as any other.
A command killed by a signal (the OOM killer) says so in `signalled`: there is no connection that could have been lost.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from ClusterShell.Worker.Exec import ExecClient, ExecWorker

END_WAIT = 30.0  # s a command told to end (SIGTERM) has before it is killed, where ClusterShell itself aborts it


class _ArgvClient(ExecClient):
    """The command as an argv in a session of its own; aborted (ClusterShell's timeout, a task's abort), it is told
    to end first, as a lost session tells a remote hostrun, and killed only if it has not within END_WAIT."""

    def _build_cmd(self) -> tuple[list[str], None]:
        return ["setsid", *self.command], None

    def _close(self, abort: bool, timeout: bool) -> None:
        if abort and self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + END_WAIT
            while self.popen.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        elif not abort and self.popen.wait() < 0:
            self.worker.signalled = -self.popen.returncode
        ExecClient._close(self, abort, timeout)


class LocalWorker(ExecWorker):
    """One local host's command (an argv), its events under the host's name."""

    SHELL_CLASS = _ArgvClient

    def __init__(self, host: str, argv: list[str], handler: Any, timeout: float | None):
        self.signalled: int | None = None  # the signal that ended the command, if one did
        super().__init__(host, handler, timeout, command=list(argv), stderr=True)

    def end(self) -> bool:
        """Tell the command to end (SIGTERM), as a lost ssh session tells a remote one; its reply comes as it ends.
        False when it has not started yet."""
        started = [c for c in self._clients if c.popen is not None]
        for client in started:
            if client.popen.poll() is None:
                client.popen.send_signal(signal.SIGTERM)
        return bool(started)
