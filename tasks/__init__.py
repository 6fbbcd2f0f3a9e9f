"""iolab's commands: `./lab --list` shows them, `./lab --help TASK` explains one.

Thin on purpose: each task parses its flags and calls into pyfiles/iolab/; a module per namespace.
"""

from __future__ import annotations

import gc

from invoke import Collection


def _namespaces() -> Collection:
    """Every namespace, imported with the collector off. What the imports make lives as long as the command, so no
    collection need walk it: none runs while they make it (the collections pydantic's schemas set off cost ≈ 30 ms
    of the ≈ 330 ms; what they leave unreachable, ≈ 800 objects, stays), and gc.freeze() then moves it out of reach
    of the run's collections and of the interpreter's last one at exit (0.13-0.17 -> 0.04-0.05 s); both in
    docs/PERFORMANCE.md."""
    gc.disable()
    try:
        from .bench import bench
        from .data import data
        from .lab import lab
        from .report import report
        from .results import results, status
        from .storage import storage
        from .test import lint, test
        from .trace import trace

        return Collection(lab, bench, storage, report, results, data, trace, status, test, lint)
    finally:
        gc.freeze()
        gc.enable()


ns = _namespaces()
