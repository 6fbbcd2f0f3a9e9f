"""MLCommons' KV-cache I/O trace (kv-cache.py `--io-trace-log x.csv`) → a trace's records (stdlib only).

Its columns: Timestamp (seconds), Operation (read or write, any case), Object_Size_Bytes, Tier,
Key, Phase. The benchmark logs what each tier would move, without doing it (a null backend);
the objects of one tier (the storage's: `nvme` by default) become files `<tier>/<key>` (the key's
characters outside [A-Za-z0-9._-] as '_'), each operation an open, a whole-object read or write
at offset 0 and a close of one process, at its timestamp (the rows sorted: the benchmark's users
log from threads of their own). The log has no durations (0) and no processes: the replay plays
its operations one after the other, in one fio job (docs/TRACES.md).
"""

from __future__ import annotations

import csv
import re
from typing import Any

from iolab.shared.trace import Record

COLUMNS = ("Timestamp", "Operation", "Object_Size_Bytes", "Tier", "Key", "Phase")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class KvcacheTraceError(ValueError):
    """Not MLCommons' KV-cache I/O trace."""


def _rows(text: str, tier: str) -> list[tuple[float, str, int, str]]:
    """(seconds, read|write, bytes, file name) of the rows of `tier`, in the log's order."""
    reader = csv.DictReader(text.splitlines())
    if not reader.fieldnames or any(column not in reader.fieldnames for column in COLUMNS):
        raise KvcacheTraceError(
            f"not MLCommons' KV-cache I/O trace: its header is {reader.fieldnames}, expected the columns "
            f"{', '.join(COLUMNS)} (kv-cache.py --io-trace-log, decompressed)"
        )
    out = []
    for number, row in enumerate(reader, start=2):
        if (row["Tier"] or "").strip().lower() != tier.lower():
            continue
        operation = (row["Operation"] or "").strip().lower()
        try:
            seconds, size = float(row["Timestamp"]), int(row["Object_Size_Bytes"])
        except (TypeError, ValueError):
            raise KvcacheTraceError(f"line {number}: Timestamp or Object_Size_Bytes is not a number") from None
        if operation not in ("read", "write") or size < 0 or not row["Key"]:
            raise KvcacheTraceError(f"line {number}: operation {operation!r}, size {size}, key {row['Key']!r}")
        out.append((seconds, operation, size, f"{_UNSAFE.sub('_', tier)}/{_UNSAFE.sub('_', row['Key'])}"))
    if not out:
        raise KvcacheTraceError(f"no operation of tier {tier!r} in the log: name the storage tier with --tier")
    return out


def convert(text: str, tier: str = "nvme") -> tuple[dict[str, Any], list[Record]]:
    """(the header's files and figures, the records) of the KV-cache log's operations on `tier`."""
    rows = sorted(_rows(text, tier), key=lambda row: row[0])
    origin = rows[0][0]
    index: dict[str, int] = {}
    sizes: list[int] = []
    records: list[Record] = []
    for seconds, operation, size, name in rows:
        at = round((seconds - origin) * 1e6)
        number = index.setdefault(name, len(sizes))
        if number == len(sizes):
            sizes.append(0)
        sizes[number] = max(sizes[number], size)
        records += [(1, "open", number, 0, 0, at, 0), (1, operation, number, 0, size, at, 0)]
        records.append((1, "close", number, 0, 0, at, 0))
    header = {
        "root": f"kvcache:{tier}",
        "files": [[name, sizes[i]] for name, i in index.items()],
        "started_at": origin,
        "tracer": {"name": "mlcommons kv-cache --io-trace-log", "tier": tier},
    }
    return header, records
