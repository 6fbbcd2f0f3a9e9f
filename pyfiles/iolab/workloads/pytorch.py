"""Workload kind `pytorch`: a PyTorch DataLoader over the data set, optionally feeding emulated or real accelerators."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from iolab.schema import Bool, Ramp
from iolab.workloads.accelerator import Accelerator
from iolab.workloads.base import LOADER_TIMEOUT, LoaderWorkload
from iolab.workloads.dlio import training_file
from iolab.workloads.mlperf import AU_THRESHOLD, PRESETS, MlperfFields

# What DLIO reads as iolab's readers read it: unet3d's NPZ files (np.load), JPEG files opened with PIL.
DLIO_READERS = ("npz", "pil")


def _requirement(value: str) -> str:
    """One requirement, a wheel's path or a URL, never a pip option (it would change what pip does with the rest)."""
    if not value.strip() or value.lstrip().startswith("-") or any(c in value for c in "\n\r"):
        raise ValueError(f"{value!r} is not one requirement, a wheel's path or a URL (a pip option is refused)")
    return value


class PytorchWorkload(LoaderWorkload, MlperfFields):
    """A PyTorch DataLoader over the data set, optionally feeding emulated or real accelerators."""

    type: Literal["pytorch"]
    # dali: NVIDIA DALI decodes (iolab.host.loader.dali_reader); s3: samples from the bucket of an s3 backend.
    reader: Literal["pil", "cv2-imread", "cv2-imdecode", "packed", "npz", "s3", "dali"] = "packed"
    # What reader dali reads: the data set's files, or its TFRecord pack (made by the dataset phase).
    dali_input: Literal["files", "tfrecord"] = "files"
    workers: Annotated[int, Field(ge=0, le=256)] = 2
    batch_size: Annotated[int, Field(ge=1, le=65536)] = 64
    pin_memory: Bool = False
    prefetch_factor: Annotated[int, Field(ge=1, le=64)] = 2
    decode: Bool = True
    shuffle: Bool = True
    epochs: Annotated[int, Field(ge=1, le=1000)] = 1
    steps: Annotated[int, Field(ge=2)] | None = None  # batches per epoch and accelerator, at most
    syscall_profile: Bool = False
    preprocess_time: Ramp = 0.0  # slept per sample after reading (DLIO's)
    accelerator: Accelerator | None = None
    accelerators: Annotated[int, Field(ge=1, le=256)] = 1  # per host: one rank process each
    distributed: Bool = False
    seed: int = 0
    # search: accelerators finds the most accelerators per host, up to `accelerators`, that hold AU ≥ 90%
    # (iolab.accelerators); one search per backend, whatever the campaign's repetitions.
    search: Literal["accelerators"] | None = None
    # dlio: DLIO itself (dlio_benchmark, MLPerf Storage's reference) runs the workload instead of iolab's loader,
    # one MPI job over the run's hosts (roles/bench_dlio, iolab.host.dlio), a reference leg beside iolab's figures.
    engine: Literal["iolab", "dlio"] = "iolab"
    # What pip installs DLIO from on the hosts instead of PyPI's dlio-benchmark==2.0.0 (a wheel's path or URL, a
    # requirement: MLCommons' fork on a lab's mirror); installed without its declared dependencies, as that one is.
    dlio_requirement: Annotated[str, AfterValidator(_requirement)] | None = None

    uses_dataset: ClassVar[bool] = True

    @model_validator(mode="after")
    def _consistent(self) -> PytorchWorkload:
        if self.reader == "cv2-imread" and not self.decode:
            raise ValueError(
                "reader cv2-imread always decodes: use decode: true, or cv2-imdecode or packed for bytes only"
            )
        if self.dali_input != "files" and self.reader != "dali":
            raise ValueError("dali_input is what reader dali reads: set reader: dali or drop dali_input")
        if self.accelerator and self.accelerator.type == "gpu" and not self.decode:
            raise ValueError("accelerator gpu trains on images: it needs decode: true")
        if self.engine == "dlio":
            _dlio_consistent(self)
        elif self.dlio_requirement:
            raise ValueError("dlio_requirement is what engine dlio installs: set engine: dlio or drop it")
        if self.search and self.accelerator is None:
            raise ValueError(
                "search: accelerators searches how many accelerators the backend feeds: "
                "add accelerator: {type: h100} (or a100, custom)"
            )
        return self

    # Workload's ClassVar, a property here: the engine picks the role (bench_<tool>) and the parser.
    @property
    def tool(self) -> str:  # type: ignore[override]
        """pytorch (roles/bench_pytorch, iolab's loader), or dlio (roles/bench_dlio, DLIO under MPI)."""
        return "dlio" if self.engine == "dlio" else "pytorch"

    @property
    def needs_s3(self) -> bool:
        """Reader s3 reads an s3 backend's bucket (iolab.host.loader.s3_objects.S3Objects)."""
        return self.reader == "s3"

    @property
    def formats(self) -> set[str]:
        if self.reader == "dali" and self.dali_input == "tfrecord":
            return {"tfrecord"}
        return {"packed"} if self.reader == "packed" else set()

    def dlio_file(self, repetition: int = 1) -> dict[str, Any]:
        """DLIO's workload file for engine dlio (the hosts add their data set's place, files and sizes)."""
        assert self.accelerator is not None  # _dlio_consistent
        return training_file(
            self.accelerator.model,
            self.batch_size,
            self.workers,
            self.prefetch_factor,
            self.epochs,
            self.accelerator.compute_time(self.batch_size),
            self.repetition_seed(self.seed, repetition) if self.shuffle else None,
            steps=self.steps,
            au_threshold=PRESETS[self.mlperf].au_threshold if self.mlperf in PRESETS else AU_THRESHOLD,
        )

    def loader_options(self, repetition: int = 1) -> dict[str, Any]:
        """The loader's flags (python -m iolab.host.loader.torch_loader), named as its flags are: the role passes
        them as one object (`--options JSON`), so a new setting is this schema's field and the loader's flag."""
        kind = "none" if self.accelerator is None else "gpu" if self.accelerator.type == "gpu" else "emulated"
        compute = self.accelerator.compute_time(self.batch_size) if self.accelerator and kind == "emulated" else 0.0
        return {
            "reader": self.reader,
            "dali_input": self.dali_input,
            "workers": self.workers,
            "batch_size": self.batch_size,
            "pin_memory": self.pin_memory,
            "prefetch_factor": self.prefetch_factor,
            "decode": self.decode,
            "shuffle": self.shuffle,
            "epochs": self.epochs,
            "steps": self.steps or 0,
            "syscall_profile": self.syscall_profile,
            "preprocess_time": self.preprocess_time,
            "accelerator": kind,
            "compute_per_batch": compute,
            "accelerators": self.accelerators,
            "seed": self.repetition_seed(self.seed, repetition),
        }

    def params(self) -> dict[str, Any]:
        """dali_input only where reader dali reads it, engine only when dlio (other samples stay as they were)."""
        params = super().params()
        if self.reader != "dali":
            del params["dali_input"]
        if self.engine == "iolab":  # the samples of iolab's loader carry what they carried before engine dlio
            del params["engine"]
        return params

    def role_vars(self, target: str) -> dict[str, Any]:
        if self.engine == "dlio":
            return {
                "bench_dlio_target": target,
                "bench_dlio_workload": self.dlio_file(),
                "bench_dlio_ranks": self.accelerators,
                "bench_dlio_timeout": self.run_timeout(LOADER_TIMEOUT),
                **({"bench_dlio_requirement": self.dlio_requirement} if self.dlio_requirement else {}),
            }
        return {
            **super().role_vars(target),
            "bench_pytorch_packs": sorted(self.formats),
            "bench_pytorch_distributed": self.distributed,
        }

    def repetition_vars(self, repetition: int) -> dict[str, Any]:
        if self.engine == "dlio":
            return {"bench_dlio_workload": self.dlio_file(repetition)}
        return super().repetition_vars(repetition)

    def commands(self) -> list[str]:
        if not self.dlio_requirement:
            return super().commands()
        return [
            *super().commands(),
            f"dlio_requirement installs {self.dlio_requirement!r} with pip, as root, on every host "
            "(a local tree's setup.py runs there)",
        ]

    def describe(self) -> str:
        if self.engine == "dlio":
            assert self.accelerator is not None
            return (
                f"DLIO (dlio_benchmark under mpirun, one job over the hosts), reader threads {self.workers}, "
                f"batch {self.batch_size}, {self.epochs} epoch(s), {self.accelerators} emulated "
                f"{self.accelerator.type} per host ({self.accelerator.compute_time(self.batch_size):g} s per batch)"
            )
        what = {"none": "no accelerator", "gpu": "ResNet-50 training on the host's GPUs"}
        kind = "none" if self.accelerator is None else self.accelerator.type
        acc = what.get(kind) or (
            f"{self.accelerators} emulated {kind} ({self.accelerator.compute_time(self.batch_size):g} s per batch)"
            if self.accelerator
            else ""
        )
        if self.search:
            acc = f"the most emulated {kind} per host at AU ≥ 90 %, up to {self.accelerators}"
        return (
            f"PyTorch DataLoader, reader {self.reader}, {self.workers} workers, batch {self.batch_size}, "
            f"decode {'on' if self.decode else 'off'}, {self.epochs} epoch(s), {acc}"
            + (", one job over all hosts" if self.distributed else "")
            + (", under strace -c" if self.syscall_profile else "")
            + (f"; {self.file_note}" if self.file_note else "")
        )


def _dlio_consistent(w: PytorchWorkload) -> None:
    """engine dlio runs what DLIO can: emulated accelerators, a reader DLIO has, one job over the hosts."""
    if w.accelerator is None or w.accelerator.type == "gpu":
        raise ValueError("engine dlio emulates accelerators: add accelerator: {type: h100, model: unet3d} (or custom)")
    if w.reader not in DLIO_READERS:
        raise ValueError(f"engine dlio reads files as DLIO does: reader npz (unet3d) or pil (JPEG), not {w.reader}")
    for key in ("search", "syscall_profile", "preprocess_time"):  # (DLIO pins memory whatever pin_memory says)
        if getattr(w, key):
            raise ValueError(f"engine dlio runs DLIO as it is: {key} is iolab's loader's; drop it")
    if not w.decode:
        raise ValueError("engine dlio decodes as DLIO does: drop decode: false")
