"""iolab's commands: `./lab --list` shows them, `./lab --help TASK` explains one.

Thin on purpose: each task parses its flags and calls into pyfiles/iolab/; a module per namespace.
"""

from __future__ import annotations

import gc

from invoke import Collection

from .bench import bench
from .data import data
from .lab import lab
from .report import report
from .results import results, status
from .storage import storage
from .test import lint, test
from .trace import trace

ns = Collection(lab, bench, storage, report, results, data, trace, status, test, lint)

# What the imports made lives as long as the command: gc.freeze() moves it out of the collector's reach, so that
# neither the run's collections nor the interpreter's last one at exit walk it again (the exit 0.13-0.17 -> 0.04-0.05
# s, docs/PERFORMANCE.md).
gc.freeze()
