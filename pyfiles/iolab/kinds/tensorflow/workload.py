"""Workload kind `tensorflow`: tf.data over the data set's TFRecord shards, optionally feeding accelerators."""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from iolab.schema import Bool
from iolab.workloads.accelerator import REAL, Accelerator
from iolab.workloads.base import LOADER_PREPARE_TASK, At, HostCall, LoaderWorkload, loader_call
from iolab.workloads.mlperf import MlperfFields

TOOL = "iolab.kinds.tensorflow.host"  # what its host call runs on each host (python -m)


class TensorflowWorkload(LoaderWorkload, MlperfFields):
    """tf.data over the data set's TFRecord shards (interleave, map, prefetch), maybe feeding emulated accelerators."""

    type: Literal["tensorflow"]
    host_program: ClassVar[str] = f"python -m {TOOL}"
    batch_size: Annotated[int, Field(ge=1, le=65536)] = 64
    private_threads: Annotated[int, Field(ge=0, le=1024)] = 0  # tf.data private thread pool; 0: shared pool
    parallel_reads: Annotated[int, Field(ge=0, le=1024)] = 0  # shards interleaved at once; 0: up to 16
    shuffle_buffer: Annotated[int, Field(ge=1)] = 1024
    decode: Bool = True
    shuffle: Bool = True
    epochs: Annotated[int, Field(ge=1, le=1000)] = 1
    steps: Annotated[int, Field(ge=2)] | None = None
    syscall_profile: Bool = False
    accelerator: Accelerator | None = None
    accelerators: Annotated[int, Field(ge=1, le=256)] = 1
    seed: int = 0

    uses_dataset: ClassVar[bool] = True
    formats: ClassVar[set[str]] = {"tfrecord"}

    @model_validator(mode="after")
    def _emulated_only(self) -> TensorflowWorkload:
        if self.accelerator and self.accelerator.type in REAL:
            raise ValueError(
                f"accelerator {self.accelerator.type} (real ResNet-50 training) is a pytorch workload's; "
                "tensorflow emulates accelerators only (a100, h100, custom)"
            )
        return self

    def loader_options(self, repetition: int = 1) -> dict[str, Any]:
        """The loader's flags (python -m iolab.kinds.tensorflow.host), named as its flags are: the role passes
        them as one object (`--options JSON`), so a new setting is this schema's field and the loader's flag."""
        return {
            "batch_size": self.batch_size,
            "private_threads": self.private_threads,
            "parallel_reads": self.parallel_reads,
            "shuffle_buffer": self.shuffle_buffer,
            "decode": self.decode,
            "shuffle": self.shuffle,
            "epochs": self.epochs,
            "steps": self.steps or 0,
            "syscall_profile": self.syscall_profile,
            "accelerator": "emulated" if self.accelerator else "none",
            "compute_per_batch": self.accelerator.compute_time(self.batch_size) if self.accelerator else 0.0,
            "accelerators": self.accelerators,
            "seed": self.repetition_seed(self.seed, repetition),
        }

    def describe(self) -> str:
        acc = (
            f"{self.accelerators} emulated {self.accelerator.type} "
            f"({self.accelerator.compute_time(self.batch_size):g} s per batch)"
            if self.accelerator
            else "no accelerator"
        )
        return (
            f"tf.data on the TFRecord shards, batch {self.batch_size}, private threads "
            f"{self.private_threads or 'shared pool'}, decode {'on' if self.decode else 'off'}, "
            f"{self.epochs} epoch(s), {acc}"
            + (", under strace -c" if self.syscall_profile else "")
            + (f"; {self.file_note}" if self.file_note else "")
        )


# What the tensorflow role takes from the controller, by the name host_call gives it (bench_tensorflow_<name>).
TENSORFLOW_VARS = ("target", "dataset", "options", "timeout")


def host_call(at: At, *, target: str, options: dict[str, Any], timeout: float, dataset: str = "") -> HostCall:
    """A tensorflow run's call on `host` (iolab.kinds.hostcall): tf.data over the TFRecord pack (python -m
    iolab.kinds.tensorflow.host), TensorFlow's C++ log quiet but for errors."""
    root, prepare, run = loader_call("tensorflow", at, target=target, dataset=dataset, timeout=timeout)
    tool = at.module(TOOL, "--root", root, "--out", at.run_dir)
    tool += ["--options", json.dumps(options)]
    return HostCall(
        [*prepare, "--pack=tfrecord"], run, tool, {"TF_CPP_MIN_LOG_LEVEL": "2"}, LOADER_PREPARE_TASK, "Run tf.data"
    )
