"""The workload kinds' registry: the campaign's union of kinds, each tool's parser.

    AnyWorkload      the union a campaign's `workloads:` entry is read as (discriminated by `type`)
    WORKLOAD_TYPES   each kind's class by its `type`
    parser_modules() the parser modules, one per tool: iolab.parsers' and each kind folder's parser.py
    registry()       each tool's parser, from the modules' TOOLS; parser_for(tool): one of them

It stands above every kind (a kind's folder here, or its module in iolab.workloads), so that nothing below imports
upward; a new kind is one line of the union. Its host call is the other registry line (iolab.kinds.hostcall).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Annotated

from pydantic import Field

from iolab import parsers
from iolab.kinds.calibrate.workload import CalibrateWorkload
from iolab.kinds.checkpoint.workload import CheckpointWorkload
from iolab.kinds.fio.workload import FioWorkload
from iolab.kinds.kvcache.workload import KvcacheWorkload
from iolab.kinds.metadata.workload import MetadataWorkload
from iolab.kinds.objects.workload import ObjectsWorkload
from iolab.kinds.pytorch.workload import PytorchWorkload
from iolab.kinds.replay.workload import ReplayWorkload
from iolab.kinds.tensorflow.workload import TensorflowWorkload
from iolab.parsers import Parser
from iolab.schema import kinds
from iolab.workloads.base import Workload

AnyWorkload = Annotated[
    FioWorkload
    | PytorchWorkload
    | MetadataWorkload
    | TensorflowWorkload
    | CheckpointWorkload
    | ObjectsWorkload
    | CalibrateWorkload
    | KvcacheWorkload
    | ReplayWorkload,
    Field(discriminator="type"),
]
WORKLOAD_TYPES: dict[str, type[Workload]] = kinds(AnyWorkload)
FOLDERS = Path(__file__).parent  # iolab/kinds/: a folder per kind


def parser_modules() -> list[ModuleType]:
    """The parser modules, one per tool, each declaring its METRICS and the tools it parses in TOOLS: iolab.parsers'
    own and each kind folder's parser.py, in the folders' order by name."""
    folders = sorted(p.parent.name for p in FOLDERS.glob("*/parser.py"))
    return [*parsers.modules(), *(importlib.import_module(f"{__package__}.{k}.parser") for k in folders)]


def registry() -> dict[str, Parser]:
    """Each tool's parser, from the parser modules' TOOLS: the one list of them (a new tool touches its module
    only)."""
    found: dict[str, Parser] = {}
    for module in parser_modules():
        for tool in getattr(module, "TOOLS", ()):
            if tool in found:
                raise ValueError(f"tool {tool} has two parsers")
            found[tool] = module.parse
    return found


def parser_for(tool: str) -> Parser:
    """The parser of a workload kind's raw files: the parser module that names the tool in its TOOLS."""
    return registry()[tool]
