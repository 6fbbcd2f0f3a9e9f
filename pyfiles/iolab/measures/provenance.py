"""Hosts side by side: the provenance each host reported, and where they differ.

Hosts in one campaign should match (same CPU, memory, kernel, versions); a
difference is a warning, because it makes per-host results incomparable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# What should match across the clients of one campaign, in the order shown.
COMPARED = (
    "os",
    "kernel",
    "cpu_model",
    "cpu_count",
    "numa_nodes",
    "memory_bytes",
    "python",
    "iolab_version",
    "gpus",
    "sysctl",
)


def load(facts_dir: Path, hosts: list[str]) -> dict[str, dict[str, Any]]:
    return {h: json.loads((facts_dir / f"{h}.json").read_text()) for h in hosts if (facts_dir / f"{h}.json").exists()}


def _text(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True) if value else "—"
    return str(value)


def differences(facts: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """{fact: {host: value}} for the facts whose values differ between hosts."""
    out = {}
    for key in COMPARED:
        values = {host: _text(f.get(key)) for host, f in facts.items()}
        if len(set(values.values())) > 1:
            out[key] = values
    return out


def table(facts: dict[str, dict[str, Any]]):
    from rich.table import Table

    from iolab.units import human

    differ = differences(facts)
    out = Table(title="host provenance (yellow: hosts differ)", title_justify="left")
    out.add_column("fact")
    for host in facts:
        out.add_column(host)
    for key in COMPARED:
        cells = []
        for host in facts:
            value = facts[host].get(key)
            text = human(value, "B") if key == "memory_bytes" and value else _text(value)
            cells.append(f"[yellow]{text}[/]" if key in differ else text)
        out.add_row(key, *cells)
    return out
