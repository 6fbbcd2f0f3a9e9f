"""/proc/PID/mountinfo, parsed (stdlib only: the hosts' mount checks and telemetry, and the controller's simulated
hosts read it alike).

    for mount in mountinfo.parse(Path("/proc/self/mountinfo").read_text()):
        mount["target"], mount["fstype"], mount["source"], mount["devno"], mount["options"]
"""

from __future__ import annotations

import re
from typing import Any

_OCTAL = re.compile(r"\\([0-7]{3})")


def unescape(field: str) -> str:
    """A mountinfo path: blanks, tabs, newlines and backslashes are written as \\ooo (octal)."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse(text: str) -> list[dict[str, Any]]:
    """The mounts of a mountinfo text, in mount order: id, devno, target, fstype, source, options (the mount's and
    the superblock's, once each); a line too short to be a mount is left out."""
    mounts = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or len(tail) < 3:
            continue
        mounts.append(
            {
                "id": int(fields[0]),
                "devno": fields[2],
                "target": unescape(fields[4]),
                "fstype": tail[0],
                "source": unescape(tail[1]),
                "options": ",".join(dict.fromkeys(fields[5].split(",") + tail[2].split(","))),
            }
        )
    return mounts
