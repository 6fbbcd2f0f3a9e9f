"""File sizes by power-of-two bucket, and the fio --bssplit that reads like them.

A bucket B holds the sizes in [B, 2B) — what the usual one-liner computes:

    find . -type f -printf '%s\\n' | awk '{b=1; while (b*2 <= $1) b*=2; n[b]++} END {for (b in n) print b, n[b]}'

>>> bssplit({2048: 1, 4096: 2, 65536: 97})
'2k/1:4k/2:64k/97'
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from iolab.host.dataset.manifest import MANIFEST_NAME
from iolab.units import human

PACK_MARKER = "pack.json"  # a directory holding one is a packed copy, not data files


def bucket(size: int) -> int:
    """The power-of-two bucket of a size: the largest power of two <= size (0 for 0)."""
    return 1 << (size.bit_length() - 1) if size > 0 else 0


def histogram(root: Path) -> dict[int, int]:
    """{bucket bytes: file count} of the regular files under root, ascending.

    Symbolic links are not followed. iolab's own metadata is left out: the
    manifest at the root and the directories of packed copies (holding pack.json).
    """
    counts: dict[int, int] = {}
    stack = [Path(root)]
    while stack:
        directory = stack.pop()
        with os.scandir(directory) as scan:
            entries = list(scan)
        if directory != Path(root) and any(e.name == PACK_MARKER for e in entries):
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                if directory == Path(root) and entry.name == MANIFEST_NAME:
                    continue
                try:
                    b = bucket(entry.stat(follow_symlinks=False).st_size)
                except FileNotFoundError:
                    continue  # gone since the directory was listed: not part of the data set
                counts[b] = counts.get(b, 0) + 1
    return dict(sorted(counts.items()))


def percentages(hist: dict[int, int]) -> dict[int, int]:
    """Whole percentages of the non-empty files per bucket, summing to exactly 100.

    Largest remainder: each bucket gets the floor of its share, and the points left
    go to the largest fractions. Buckets that round to 0 are left out.
    """
    counts = {b: n for b, n in hist.items() if b > 0 and n > 0}
    total = sum(counts.values())
    if not total:
        raise ValueError("no non-empty files: nothing to build a bssplit from")
    exact = {b: 100 * n / total for b, n in counts.items()}
    shares = {b: int(x) for b, x in exact.items()}
    for b in sorted(exact, key=lambda b: (shares[b] - exact[b], b))[: 100 - sum(shares.values())]:
        shares[b] += 1
    return {b: p for b, p in sorted(shares.items()) if p > 0}


def fio_size(size: int) -> str:
    """A size as fio reads it (k and m are 1024-based by default): 2048 -> '2k'."""
    for shift, suffix in ((30, "g"), (20, "m"), (10, "k")):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{suffix}"
    return str(size)


def bssplit(hist: dict[int, int]) -> str:
    """fio --bssplit value from a histogram: one read per file, sized as its bucket."""
    return ":".join(f"{fio_size(b)}/{p}" for b, p in percentages(hist).items())


_SPLIT_ENTRY = re.compile(r"^([0-9]+)([kmg]?)/([0-9]+)$", re.IGNORECASE)
_SUFFIX = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_bssplit(text: str) -> dict[int, int]:
    """{block size bytes: percent} from a fio --bssplit value; strict, unlike fio itself.

    fio accepts '2x/50' as 2 bytes and percentages that do not add up; iolab's
    own values must not rely on that.
    """
    out: dict[int, int] = {}
    for part in text.split(":"):
        match = _SPLIT_ENTRY.match(part.strip())
        if not match:
            raise ValueError(f"bad bssplit entry {part!r} in {text!r}: expected SIZE/PERCENT such as 64k/38")
        size = int(match.group(1)) * _SUFFIX[match.group(2).lower()]
        if size in out:
            raise ValueError(f"block size {part!r} appears twice in {text!r}")
        out[size] = int(match.group(3))
    if sum(out.values()) != 100:
        raise ValueError(f"bssplit percentages of {text!r} sum to {sum(out.values())}, not 100")
    return out


def table(hist: dict[int, int]) -> str:
    """The histogram for people: one line per bucket [B, 2B)."""
    total = sum(hist.values())
    lines = [f"{'from':>9}  {'to':>9}  {'files':>10}  {'share':>6}"]
    for b, n in hist.items():
        low, high = ("0 B", "1 B") if b == 0 else (human(b, "B"), human(2 * b, "B"))
        lines.append(f"{low:>9}  {high:>9}  {n:>10}  {100 * n / total:>5.1f}%")
    lines.append(f"{'total':>20}  {total:>10}")
    return "\n".join(lines)
