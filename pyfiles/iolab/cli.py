"""What `tasks.py` shares: errors as one line, the lab a command works on."""

from __future__ import annotations

import functools
import signal
import sys
from pathlib import Path
from typing import Any, Callable

from invoke.exceptions import Exit
from rich.console import Console

from iolab import hosts, paths
from iolab.bench import Lab
from iolab.errors import Interrupted, Terminated, UserError, raise_terminated

console = Console(stderr=True, highlight=False)


def user_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """A UserError, Ctrl-C or SIGTERM ends the command with one line and a non-zero exit, no traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        previous = signal.signal(signal.SIGTERM, raise_terminated)   # SIGTERM tears down as Ctrl-C does
        try:
            return func(*args, **kwargs)
        except KeyboardInterrupt as exc:
            how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
            error: UserError = Interrupted(f"{how}: teardown done, results gathered so far are kept; "
                                           "run the same command again to resume")
            error.exit_code = 143 if isinstance(exc, Terminated) else error.exit_code
        except UserError as exc:
            error = exc
        finally:
            signal.signal(signal.SIGTERM, previous)
        raise Exit(f"iolab: {error}", code=error.exit_code)

    return wrapper


def lab(inventory: str | None, pattern: str | None) -> Lab:
    inv = hosts.load_inventory(Path(inventory) if inventory else paths.DEFAULT_INVENTORY)
    return Lab(inventory=inv, hosts=hosts.select_hosts(pattern, inv), console=console)


def echo(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
