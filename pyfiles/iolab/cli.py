"""What `tasks.py` shares: errors as one line, the lab a command works on."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, Callable

from invoke.exceptions import Exit
from rich.console import Console

from iolab import hosts, paths
from iolab.bench import Lab
from iolab.errors import Interrupted, UserError

console = Console(stderr=True, highlight=False)


def user_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """A UserError or Ctrl-C ends the command with one line and a non-zero exit, no traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except KeyboardInterrupt:
            error: UserError = Interrupted("interrupted: teardown done, results gathered so far are kept; "
                                           "run the same command again to resume")
        except UserError as exc:
            error = exc
        raise Exit(f"iolab: {error}", code=error.exit_code)

    return wrapper


def lab(inventory: str | None, pattern: str | None) -> Lab:
    inv = hosts.load_inventory(Path(inventory) if inventory else paths.DEFAULT_INVENTORY)
    return Lab(inventory=inv, hosts=hosts.select_hosts(pattern, inv), console=console)


def echo(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
