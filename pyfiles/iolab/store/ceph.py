"""A Ceph backend's storage side, on the controller: what a run's hosts get, and what they wrote.

What a run's hosts get of the cluster is the backend's (iolab.backends.base.CephBackend.storage_side);
`cache_state` says what a run's drop reached ("dropped: clients + OSDs"), and `load_series` gives the report
the OSDs' series.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iolab.shared.protocol import OSD_FILE


def cache_state(metadata: dict[str, Any]) -> str | None:
    """A sample's cache state with what the drop reached: 'dropped: clients + OSDs' (+ MDS, + storage hosts)."""
    state = metadata.get("cache_state")
    storage = metadata.get("storage_cache_state")
    if state != "dropped" or not isinstance(storage, dict):
        return state
    parts = ["clients"]
    ceph = storage.get("ceph") or {}
    if ceph.get("dropped"):
        parts.append("OSDs + MDS" if ceph.get("mds") else "OSDs")
    if storage.get("dropped_on"):
        parts.append("storage hosts")
    failed = " (not the OSDs: " + ceph["error"] + ")" if ceph.get("error") else ""
    return "dropped: " + " + ".join(parts) + failed


SERIES = (
    ("osd_read_bw", "read_bw"),
    ("osd_write_bw", "write_bw"),
    ("osd_iops", "iops"),
    ("osd_op_await", "op_await"),
    ("osd_cache_hit_bw", "cache_hit_bw"),
    ("osd_cache_miss_bw", "cache_miss_bw"),
)


def load_series(host_dir: Path) -> dict[str, list[tuple[float, float]]]:
    """{`osd_read_bw{osd=0}` (B/s), `osd_write_bw{...}`, `osd_iops{...}`, `osd_op_await{...}` (s),
    `osd_cache_hit_bw{...}`, `osd_cache_miss_bw{...}` (B/s): [(t, v), ...]} of the host's OSD telemetry."""
    series: dict[str, list[tuple[float, float]]] = {}
    try:
        lines = (host_dir / OSD_FILE).read_text().splitlines()
    except OSError:
        return series
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("type") != "sample":
            continue
        for osd, figures in record.get("osd", {}).items():
            for name, key in SERIES:
                if isinstance(figures.get(key), (int, float)):
                    series.setdefault(f"{name}{{osd={osd}}}", []).append((float(record["t"]), float(figures[key])))
    return series
