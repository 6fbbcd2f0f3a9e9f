"""The one line worth showing from a failed tool's stderr: its last meaningful error line, not a banner.

A run that fails is said in one line (iolab.host.hostrun's `TOOL exited N: LINE`, a parser's `stderr.txt
ends: LINE`). The last line of stderr is often not the cause. mpirun ends a failed job with its own
messages, framed in rules of dashes (`Primary job terminated normally, but 1 process returned ...`, `mpirun
detected that one or more processes exited with non-zero status ...`, `Process name: [[7960,1],0]`), and
prefixes its daemon's notes with `[host:pid]` (`1 more process has sent help message ...`); the rank's own
`ModuleNotFoundError: No module named 'tensorflow'` came before all of that. So:

- blank lines, rules (dashes, equals signs...), and Open MPI's framed messages and `[host:pid]` notes are
  left out: a framed block counts only when nothing outside a frame says anything (its text is then the
  message: `MPI_ABORT was invoked on rank 2 ...`);
- of what is left, the last line that names an error (a Python exception `NameError: ...`, `error:`,
  `ERROR`, `fatal`) wins, else the last line.

Stdlib only: hostrun runs it on the hosts, the parsers on the controller.
"""

from __future__ import annotations

import re
from pathlib import Path

# What is read of a stderr file: its end (DLIO logs every step there).
TAIL_BYTES = 64 * 1024
_RULE = re.compile(r"^[\s\-=*_#~+]{3,}$")
# Open MPI's daemon notes: `[vm:04157] 1 more process has sent help message ...`, `[vm:04157] [[31939,0],0]
# ORTE_ERROR_LOG: Data unpack would read past end of buffer ...` (a rank's own lines carry no such prefix).
_MPI_NOTE = re.compile(r"^\[[\w.-]+:\d+\] ")
_ERROR = re.compile(r"^\w*(Error|Exception|Interrupt)\b|^SystemExit\b|\berror:|\bERROR\b|\b[Ff]atal\b|\bFATAL\b")


def _unframed(lines: list[str]) -> tuple[list[str], list[str]]:
    """(lines outside rules, lines inside a pair of rules), rules and blank lines left out."""
    outside: list[str] = []
    inside: list[str] = []
    rules = [i for i, line in enumerate(lines) if _RULE.match(line)]
    framed: set[int] = set()
    # Rules pair up from the end, where mpirun puts its blocks (---- text ---- ---- text ----): a tool's own
    # rule earlier on is left unpaired and frames nothing.
    for last, first in zip(rules[::-1][0::2], rules[::-1][1::2], strict=False):
        framed.update(range(first, last + 1))
    for i, line in enumerate(lines):
        if not line.strip() or _RULE.match(line):
            continue
        (inside if i in framed else outside).append(line)
    return outside, inside


def last_message(text: str) -> str:
    """The last meaningful error line of a tool's stderr (see the module's doc); '' when it says nothing."""
    lines = [line.strip() for line in text.splitlines()]
    outside, inside = _unframed(lines)
    said = [line for line in outside if not _MPI_NOTE.match(line)] or inside
    for line in reversed(said):
        if _ERROR.search(line):
            return line
    return said[-1] if said else ""


def file_message(path: Path) -> str:
    """last_message of a file's last TAIL_BYTES; '' when it is missing, unreadable or says nothing."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            data = f.read()
    except OSError:
        return ""
    return last_message(data.decode(errors="replace"))
