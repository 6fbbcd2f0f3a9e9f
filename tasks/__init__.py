"""iolab's commands: `./lab --list` shows them, `./lab --help TASK` explains one.

Thin on purpose: each task parses its flags and calls into pyfiles/iolab/; a module per namespace.
"""

from __future__ import annotations

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
