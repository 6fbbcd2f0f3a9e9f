"""Workload kinds, one module each: schema, defaults, the bench role's variables; and their parsers."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from iolab.parsers import Parser
from iolab.schema import kinds
from iolab.workloads.base import Workload
from iolab.workloads.calibrate import CalibrateWorkload
from iolab.workloads.checkpoint import CheckpointWorkload
from iolab.workloads.fio import FioWorkload
from iolab.workloads.kvcache import KvcacheWorkload
from iolab.workloads.metadata import MetadataWorkload
from iolab.workloads.objects import ObjectsWorkload
from iolab.workloads.pytorch import PytorchWorkload
from iolab.workloads.replay import ReplayWorkload
from iolab.workloads.tensorflow import TensorflowWorkload

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


def parser_for(tool: str) -> Parser:
    """The parser of a workload kind's raw files: the parser module that names the tool in its TOOLS
    (iolab.parsers.registry, which the metric catalogue reads too)."""
    from iolab.parsers import registry

    return registry()[tool]
