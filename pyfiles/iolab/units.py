"""Sizes, durations and rates: parsed from campaign files, formatted for people.

>>> parse_size("2GiB"), parse_size("500MB"), parse_duration("2m")
(2147483648, 500000000, 120.0)
"""

from __future__ import annotations

import json
import math
import re
import unicodedata

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1000**4,
    "tib": 1024**4,
}
# Beyond these a value is a typo, not a plan (runtime: 99999999999h, size: 1EB).
MAX_SIZE = 1 << 60
MAX_DURATION = 7 * 86400.0
_DURATION_UNITS = {"": 1.0, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
COUNT = "count"  # the unit of a number of things, never written after the number
_NUMBER_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def _split(text: str | int | float, what: str, example: str) -> tuple[float, str]:
    if isinstance(text, bool):
        raise ValueError(f"expected a {what} such as {example}, got {text!r}")
    if isinstance(text, (int, float)):
        number, unit = float(text), ""
    else:
        match = _NUMBER_UNIT.match(str(text))
        if not match:
            raise ValueError(f"expected a {what} such as {example}, got {text!r}")
        number, unit = float(match.group(1)), match.group(2).lower()
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"a {what} must be positive, got {text!r}")
    return number, unit


def parse_size(text: str | int) -> int:
    """Bytes from '2GiB', '500MB', '64k' or a plain number of bytes (1024-based k/m/g, as fio)."""
    number, unit = _split(text, "size", "2GiB or 500MB")
    if unit not in _SIZE_UNITS:
        raise ValueError(f"unknown size unit {unit!r} in {text!r} (use B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)")
    size = number * _SIZE_UNITS[unit]
    if size != int(size):
        # 0.5 would become 0, which a tmpfs reads as "no limit": never round a size quietly.
        raise ValueError(
            f"size {text!r} is not a whole number of bytes; give bytes as a whole number or a "
            "size with a unit, such as 512MiB"
        )
    if size > MAX_SIZE:
        raise ValueError(f"size {text!r} is more than {MAX_SIZE >> 50} PiB; check the unit")
    return int(size)


def parse_duration(text: str | int | float) -> float:
    """Seconds from '10s', '2m', '500ms', '1h' or a plain number of seconds."""
    number, unit = _split(text, "duration", "10s or 2m")
    if unit not in _DURATION_UNITS:
        raise ValueError(f"unknown duration unit {unit!r} in {text!r} (use ms, s, m, h)")
    seconds = number * _DURATION_UNITS[unit]
    if seconds > MAX_DURATION:
        raise ValueError(f"duration {text!r} is more than {MAX_DURATION / 86400:g} days; check the unit")
    return seconds


def significant(value: float, digits: int = 3) -> str:
    """`digits` significant digits, never in exponent form (a table's figure reads whole): 105000, not 1.05e+05;
    1010, not 1.01e+03; 0.0000123, not 1.23e-05; trailing zeros dropped as %g drops them.

    >>> significant(1012.4), significant(0.0000123456), significant(2.5), significant(0.0)
    ('1012', '0.0000123', '2.5', '0')
    """
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    if abs(value) >= 10**digits:
        return f"{value:.0f}"
    text = f"{value:.{max(0, digits - 1 - math.floor(math.log10(abs(value))))}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def counted(count: int, noun: str) -> str:
    """A count and its noun, in the plural where it is not one: '1 run', '3 runs', '0 runs'."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _scaled(value: float, steps: list[tuple[float, str]], digits: int = 3) -> str:
    factor, suffix = next(((f, s) for f, s in steps if abs(value) >= f), steps[-1])
    return f"{significant(value / factor, digits)} {suffix}"


def human(value: float, unit: str, si: bool = False) -> str:
    """A value in a canonical unit (B/s, B, IOPS, s, ns, %, ...) written for people; `si`: bytes in GB, not GiB
    (where the field's own figures are decimal: MLPerf's checkpoint sizes)."""
    if unit in ("B/s", "B"):
        tail = "/s" if unit == "B/s" else ""
        base, prefixes = (1000, ("T", "G", "M", "k")) if si else (1024, ("Ti", "Gi", "Mi", "Ki"))
        steps = [(base ** (4 - i), f"{p}B{tail}") for i, p in enumerate(prefixes)]
        return _scaled(value, [*steps, (1, "B" + tail)])
    if unit == "ns":
        return _scaled(value, [(1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1, "ns")])
    if unit in ("IOPS", "samples/s"):
        return _scaled(value, [(1e6, "M " + unit), (1e3, "k " + unit), (1, unit)])
    if unit == "%":
        return f"{value:.1f} %"
    if unit == "s":
        return f"{significant(value)} s"
    if unit == COUNT:  # a number of things (accelerators fed, users served): the metric's name says of what
        return significant(value, 4)
    return f"{significant(value, 4)} {unit}".strip()


def printable(text: str) -> str:
    """`text` with every control or format character but newline and tab written out as `\\u001b`:
    a name from the samples can move no cursor, set no title, start no escape sequence on a terminal,
    and stays valid inside a JSON string or an XML document.

    >>> printable("tm\\x1b[31mpfs")
    'tm\\\\u001b[31mpfs'
    """
    return "".join(
        _escaped(ch) if ch not in "\n\t" and unicodedata.category(ch) in ("Cc", "Cf", "Cs") else ch for ch in text
    )


def _escaped(ch: str) -> str:
    """A character as JSON writes it escaped: `\\u001b`, or a surrogate pair beyond U+FFFF."""
    return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else json.dumps(ch)[1:-1]
