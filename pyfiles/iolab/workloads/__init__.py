"""Workload kinds, one module each: schema, defaults, the bench role's variables; and their parsers."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from iolab.parsers import Parser
from iolab.schema import kinds
from iolab.workloads.base import Workload
from iolab.workloads.checkpoint import CheckpointWorkload
from iolab.workloads.fio import FioWorkload
from iolab.workloads.kvcache import KvcacheWorkload
from iolab.workloads.metadata import MetadataWorkload
from iolab.workloads.objects import ObjectsWorkload
from iolab.workloads.pytorch import PytorchWorkload
from iolab.workloads.tensorflow import TensorflowWorkload

AnyWorkload = Annotated[
    FioWorkload
    | PytorchWorkload
    | MetadataWorkload
    | TensorflowWorkload
    | CheckpointWorkload
    | ObjectsWorkload
    | KvcacheWorkload,
    Field(discriminator="type"),
]
WORKLOAD_TYPES: dict[str, type[Workload]] = kinds(AnyWorkload)


def parser_for(tool: str) -> Parser:
    """The parser of a workload kind's raw files (one per tool: iolab.parsers.<tool>)."""
    from iolab.parsers import checkpoint, dlio, fio, kvcache, metadata, objects, pytorch

    # tensorflow: iolab.host.loader.tf_loader writes the loader.json of every iolab loader.
    parsers: dict[str, Parser] = {
        "fio": fio.parse,
        "pytorch": pytorch.parse,
        "tensorflow": pytorch.parse,
        "metadata": metadata.parse,
        "checkpoint": checkpoint.parse,
        "objects": objects.parse,
        "dlio": dlio.parse,  # a pytorch workload with engine: dlio
        "kvcache": kvcache.parse,
        "mlperf_kvcache": kvcache.parse,  # a kvcache workload with engine: mlperf-kvcache: the same summary
    }
    return parsers[tool]
