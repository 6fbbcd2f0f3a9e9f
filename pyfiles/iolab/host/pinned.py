"""The pinned Python packages missing from this interpreter's environment (host side):

    python -m iolab.host.pinned NAME==VERSION ...   → ["NAME==VERSION", ...] on stdout, as JSON

What roles/iolab_host looks for before it runs pip (tasks/dl.yml, dlio.yml, kvcache.yml, pip.yml), and what the
fan-out's provisioning step asks on hosts set up (iolab.drive.steps), so that both say "installed" alike. A package
of another version counts as missing; a local version label (+cpu) is ignored.
"""

from __future__ import annotations

import json
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


def main(argv: list[str] | None = None) -> int:
    print(json.dumps(missing(sys.argv[1:] if argv is None else argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
