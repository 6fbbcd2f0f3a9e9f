"""What the tasks (tasks/) share: errors as one line, the lab a command works on."""

from __future__ import annotations

import functools
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from invoke import Task
from invoke import task as invoke_task
from invoke.exceptions import Exit
from rich.console import Console

from iolab import paths
from iolab.campaign import hosts
from iolab.drive import execute, runner
from iolab.drive.execute import Lab
from iolab.errors import Interrupted, Terminated, UserError, raise_terminated
from iolab.units import printable

console = Console(stderr=True, highlight=False)


class LabTask(Task):
    """A task whose flags never take the short flag -h: `./lab TASK -h` shows the task's help."""

    def arg_opts(self, name: str, default: Any, taken_names: set[str]) -> Any:
        return super().arg_opts(name, default, taken_names | {"h"})


task = functools.partial(invoke_task, klass=LabTask)


def user_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """A UserError, Ctrl-C or SIGTERM ends the command with one line and a non-zero exit, no traceback; its
    control characters written out (units.printable), whatever name or value the message quotes."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # For the whole command, whatever the parent set: a script or scheduler that started us with
        # SIGINT ignored still gets Ctrl-C's teardown; SIGTERM tears down as Ctrl-C does. `./lab` starts
        # such a command with SIGINT blocked: one sent while Python started is pending, and raised here.
        previous = {
            signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
            signal.SIGTERM: signal.signal(signal.SIGTERM, raise_terminated),
        }
        before, left_before = runner.plays_started, len(execute.teardown_left)
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            return func(*args, **kwargs)
        except KeyboardInterrupt as exc:
            how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
            left = execute.teardown_left[left_before:]  # the teardown's own check found these on the hosts
            if runner.plays_started == before:
                what = "before anything ran on a host; nothing to tear down"
            elif left:
                what = (
                    f"teardown incomplete: {left[0]}"
                    + (f" (and {len(left) - 1} more)" if len(left) > 1 else "")
                    + "; results gathered so far are kept"
                )
            else:
                what = "teardown done, results gathered so far are kept; run the same command again to resume"
            error: UserError = Interrupted(f"{how} {what}" if what.startswith("before") else f"{how}: {what}")
            error.exit_code = 143 if isinstance(exc, Terminated) else error.exit_code
        except UserError as exc:
            error = exc
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        raise Exit(f"iolab: {printable(str(error))}", code=error.exit_code)  # no name sends a terminal escape

    return wrapper


def lab(inventory: str | None, pattern: str | None) -> Lab:
    """The selected hosts of the inventory; a topology of gateways they name and their bound on the wait for a host
    not ready are checked first (reach.topology, reach.ready_wait)."""
    from iolab.drive import reach

    inv = hosts.load_inventory(Path(inventory) if inventory else paths.DEFAULT_INVENTORY)
    selected = hosts.select_hosts(pattern, inv)
    reach.topology(inv, selected)
    reach.ready_wait(inv, selected)
    return Lab(inventory=inv, hosts=selected, console=console)


def echo(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def here(module: str, *args: str) -> None:
    """Run a host-side program on this machine, as a host runs it (`python -m MODULE ARGS`): the controller never
    imports the host side (tests/unit/test_structure.py). Its output passes through; its failure is one line,
    UserError with its own last line."""
    import subprocess

    done = subprocess.run([sys.executable, "-m", module, *args], stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        said = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise UserError(said[-1].removeprefix("error: ") if said else f"{module} exited {done.returncode}")
