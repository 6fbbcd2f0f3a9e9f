"""The pinned Python packages missing from this interpreter's environment (host side):

    python -m iolab.host.pinned NAME==VERSION ... [--command=NAME ...]   → ["NAME==VERSION", ...] on stdout, as JSON

What roles/iolab_host looks for before it runs pip (tasks/dl.yml, dlio.yml, kvcache.yml, pip.yml), and what the
fan-out's provisioning step asks on hosts set up (iolab.drive.steps), so that both say "installed" alike. A package
of another version counts as missing; a local version label (+cpu) is ignored. A `--command=NAME` is a program the
host's OS packages give (Open MPI's mpirun): missing when it is not on PATH, listed by its NAME.
"""

from __future__ import annotations

import json
import shutil
import sys
from importlib import metadata


def missing(specs: list[str]) -> list[str]:
    """The NAME==VERSION of `specs` not installed at that version (a bare NAME: not installed at all)."""
    out = []
    for spec in specs:
        name, _, want = spec.partition("==")
        try:
            have: str | None = metadata.version(name).split("+")[0]
        except metadata.PackageNotFoundError:
            have = None
        if have is None or (want and have != want):
            out.append(spec)
    return out


COMMAND = "--command="


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    commands = [a.removeprefix(COMMAND) for a in args if a.startswith(COMMAND)]
    specs = [a for a in args if not a.startswith(COMMAND)]
    print(json.dumps(missing(specs) + [c for c in commands if shutil.which(c) is None]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
