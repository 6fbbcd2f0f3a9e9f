"""Workload kind `pytorch`: a PyTorch DataLoader over the data set, optionally feeding emulated or real accelerators."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from iolab.errors import UserError
from iolab.kinds.dlio.workload import TOOL as DLIO_TOOL
from iolab.kinds.dlio.workload import mlperf_prefetch_factor, training_file
from iolab.progress import search_probes
from iolab.schema import Bool, Ramp
from iolab.shared.protocol import S3_ENV
from iolab.workloads.accelerator import REAL, Accelerator
from iolab.workloads.base import (
    LOADER_PREPARE_TASK,
    LOADER_TIMEOUT,
    At,
    HostCall,
    LoaderWorkload,
    loader_call,
    mpi_program,
    pip_installs,
)
from iolab.workloads.mlperf import AU_THRESHOLD, PRESETS, MlperfFields

# What DLIO reads as iolab's readers read it: unet3d's NPZ files (np.load), JPEG files opened with PIL.
DLIO_READERS = ("npz", "pil")


def _requirement(value: str) -> str:
    """One requirement, a wheel's path or a URL, never a pip option (it would change what pip does with the rest)."""
    if not value.strip() or value.lstrip().startswith("-") or any(c in value for c in "\n\r"):
        raise ValueError(f"{value!r} is not one requirement, a wheel's path or a URL (a pip option is refused)")
    return value


# A search's probes (iolab.run.accelerators): each rank measures this many steps, first steps excluded.
STEP_FLOOR = 500  # measured steps per rank a probe needs (MLPerf Storage's floor), first steps excluded
# Test-only: a lower floor (a tiny data set at a test's time). It is stored with the answer, which is then flagged.
FLOOR_ENV = "IOLAB_PROBE_STEPS"


def step_floor() -> int:
    """The measured steps per rank each probe needs: STEP_FLOOR, or a test's lower floor (FLOOR_ENV)."""
    raw = os.environ.get(FLOOR_ENV, "")
    if not raw:
        return STEP_FLOOR
    if not raw.isdigit() or not 1 <= int(raw) <= STEP_FLOOR:
        raise UserError(f"{FLOOR_ENV}={raw!r}: a test's step floor is a whole number from 1 to {STEP_FLOOR}")
    return int(raw)


def probe_epochs(workload: PytorchWorkload, files: int, accelerators: int, hosts: int, floor: int) -> int:
    """The epochs of the data set a probe at `accelerators` per host runs so that each rank measures `floor` steps.

    A rank gets ceil(files / ranks) files (DistributedSampler pads), in ceil(that / batch) steps per epoch
    (at most the workload's `steps`); the first step of each epoch is not measured (MLPerf Storage), so an
    epoch measures one step fewer. A rank needs two batches per epoch: else the search is refused.
    """
    ranks = accelerators * (hosts if workload.distributed else 1)
    per_rank = -(-files // ranks)
    if per_rank < 2 * workload.batch_size:
        raise UserError(
            f"dataset.files {files} gives each of {ranks} rank(s) at {accelerators} accelerator(s) per host "
            f"{per_rank} files, under 2 batches of {workload.batch_size}: raise dataset.files to at least "
            f"{2 * workload.batch_size * ranks}, or lower batch_size or the workload's accelerators (the ceiling)"
        )
    steps = -(-per_rank // workload.batch_size)
    if workload.steps:
        steps = min(steps, workload.steps)
    return -(-floor // (steps - 1))


TOOL = "iolab.kinds.pytorch.host"  # what its host call runs on each host (python -m)


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
    # reader npz: each sample read into its rank's GPU through GPUDirect Storage (kvikio, cuFile; a GPU per rank)
    gds: Bool = False
    prefetch_factor: Annotated[int, Field(ge=1, le=64)] = 2
    decode: Bool = True
    shuffle: Bool = True
    epochs: Annotated[int, Field(ge=1, le=1000)] = 1
    steps: Annotated[int, Field(ge=2)] | None = None  # batches per epoch and accelerator, at most
    syscall_profile: Bool = False
    preprocess_time: Ramp = 0.0  # slept per sample after reading (DLIO's)
    accelerator: Accelerator | None = None
    accelerators: Annotated[int, Field(ge=1, le=256)] = 1  # per host: one rank process each
    # accelerator gpu (or cpu): the GPUs per host, one rank each (a list sweeps: [1, 2, 4, 8]); on the CPU, ranks
    gpus: Annotated[int, Field(ge=1, le=64)] | None = None
    # accelerator gpu (or cpu): synthetic, the batch made on the device (the GPUs' ceiling: no loader), or real,
    # the data set through the reader; a workload that says neither runs both (iolab.campaign.gpus.legs)
    data: Literal["synthetic", "real"] = "real"
    # One data-parallel job over every host (DDP over torch.distributed's env:// rendezvous): needs a real
    # accelerator, whose gradients are all-reduced each step; without it each host's ranks are one job.
    distributed: Bool = False
    seed: int = 0
    # search: accelerators finds the most accelerators per host, up to `accelerators`, that hold AU ≥ 90%
    # (iolab.run.accelerators); one search per backend, whatever the campaign's repetitions.
    search: Literal["accelerators"] | None = None
    # dlio: DLIO itself (dlio_benchmark, MLPerf Storage's reference) runs the workload instead of iolab's loader,
    # one MPI job over the run's hosts (roles/bench_dlio, iolab.kinds.dlio.host), a reference leg beside iolab's
    # figures.
    engine: Literal["iolab", "dlio"] = "iolab"
    # What pip installs DLIO from on the hosts instead of PyPI's dlio-benchmark==2.0.0 (a wheel's path or URL, a
    # requirement: MLCommons' fork on a lab's mirror); installed without its declared dependencies, as that one is.
    dlio_requirement: Annotated[str, AfterValidator(_requirement)] | None = None
    # DLIO's own tracing (pydftracer's trace of every rank and reader worker) on: off by default, as MLPerf Storage's
    # submitters run DLIO; traced, it delivered fewer unet3d samples/s here (docs/PERFORMANCE.md). In params.
    dlio_trace: Bool = False

    uses_dataset: ClassVar[bool] = True

    @property
    def host_program(self) -> str:
        return mpi_program(DLIO_TOOL) if self.engine == "dlio" else f"python -m {TOOL}"

    @model_validator(mode="after")
    def _consistent(self) -> PytorchWorkload:
        if self.reader == "cv2-imread" and not self.decode:
            raise ValueError(
                "reader cv2-imread always decodes: use decode: true, or cv2-imdecode or packed for bytes only"
            )
        if self.gds and self.reader != "npz":
            raise ValueError("gds reads unet3d's NPZ files into the GPU (kvikio, cuFile): it needs reader: npz")
        if self.dali_input != "files" and self.reader != "dali":
            raise ValueError("dali_input is what reader dali reads: set reader: dali or drop dali_input")
        real = self.accelerator is not None and self.accelerator.type in REAL
        if real and not self.decode:
            raise ValueError(f"accelerator {self.accelerator.type} trains on images: it needs decode: true")  # type: ignore[union-attr]
        if real and self.reader == "npz":
            raise ValueError(
                f"accelerator {self.accelerator.type} trains ResNet-50 on images; unet3d's NPZ volumes feed emulated "  # type: ignore[union-attr]
                "or calibrated unet3d accelerators (accelerator: {type: calibrated, model: unet3d})"
            )
        if real and self.accelerators != 1:
            raise ValueError("a real accelerator's ranks are its GPUs: use gpus: N (a list sweeps), not accelerators")
        if not real and (self.gpus is not None or self.data != "real"):
            raise ValueError("gpus and data are a real accelerator's: add accelerator: {type: gpu} or drop them")
        if self.distributed and not real:
            raise ValueError(
                "distributed: true trains one data-parallel model over every host (DDP, gradients all-reduced): "
                "it needs accelerator: {type: gpu} (or cpu); emulated accelerators run per host"
            )
        if self.accelerator is not None and self.accelerator.type == "calibrated":
            self.accelerator.compute_time(self.batch_size)  # a batch its profile has no figure for is refused
        if self.engine == "dlio":
            _dlio_consistent(self)
        elif self.dlio_requirement:
            raise ValueError("dlio_requirement is what engine dlio installs: set engine: dlio or drop it")
        elif self.dlio_trace:
            raise ValueError("dlio_trace turns DLIO's own tracing on: set engine: dlio or drop it")
        if self.search and self.accelerator is None:
            raise ValueError(
                "search: accelerators searches how many accelerators the backend feeds: "
                "add accelerator: {type: h100} (or a100, custom)"
            )
        return self

    # The engine picks the role (bench_<tool>) and the parser.
    @property
    def tool(self) -> str:
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

    def estimate(self) -> float | None:
        """A search: its expected probes (iolab.progress.search_probes up to `accelerators`), each at least the step
        floor's steps at the emulated accelerator's step time (a storage that keeps up; a slower one takes longer);
        None otherwise (the data set's size and the storage decide a loader's epochs)."""
        if not self.search or self.accelerator is None:
            return None
        try:
            step = self.accelerator.compute_time(self.batch_size)
        except ValueError:  # a calibrated profile without this batch: refused before any run
            return None
        return search_probes(self.accelerators) * step_floor() * step

    def dlio_file(self, repetition: int = 1) -> dict[str, Any]:
        """DLIO's workload file for engine dlio (the hosts add their data set's place, files and sizes). An MLPerf
        workload's DLIO prefetches as MLPerf's own files have it (DLIO's default), whatever iolab's loader does."""
        assert self.accelerator is not None  # _dlio_consistent
        return training_file(
            self.accelerator.model,
            self.batch_size,
            self.workers,
            None if self.mlperf else self.prefetch_factor,
            self.epochs,
            self.accelerator.compute_time(self.batch_size),
            self.repetition_seed(self.seed, repetition) if self.shuffle else None,
            steps=self.steps,
            au_threshold=PRESETS[self.mlperf].au_threshold if self.mlperf in PRESETS else AU_THRESHOLD,
        )

    def loader_options(self, repetition: int = 1) -> dict[str, Any]:
        """The loader's flags (python -m iolab.kinds.pytorch.host), named as its flags are: the role passes
        them as one object (`--options JSON`), so a new setting is this schema's field and the loader's flag."""
        acc = self.accelerator
        kind = "none" if acc is None else acc.type if acc.type in REAL else "emulated"
        compute = acc.compute_time(self.batch_size) if acc and kind == "emulated" else 0.0
        return {
            "reader": self.reader,
            "dali_input": self.dali_input,
            "workers": self.workers,
            "batch_size": self.batch_size,
            "pin_memory": self.pin_memory,
            "gds": self.gds,
            "prefetch_factor": self.prefetch_factor,
            "decode": self.decode,
            "shuffle": self.shuffle,
            "epochs": self.epochs,
            "steps": self.steps or 0,
            "syscall_profile": self.syscall_profile,
            "preprocess_time": self.preprocess_time,
            "accelerator": kind,
            "compute_per_batch": compute,
            "accelerators": self.gpus or self.accelerators,
            "seed": self.repetition_seed(self.seed, repetition),
            **({"scale": acc.scale or "full", "data": self.data} if acc is not None and kind in REAL else {}),
        }

    def params(self) -> dict[str, Any]:
        """dali_input only where reader dali reads it, engine only when dlio (other samples stay as they were)."""
        params = super().params()
        if self.accelerator is not None and self.accelerator.type in REAL:
            params["gpus"] = self.gpus or 1  # the GPUs per host each leg ran on (iolab.campaign.gpus reads it)
        else:  # samples of emulated accelerators carry what they carried before real ones
            params.pop("gpus", None)
            del params["data"]
        if not self.gds:
            del params["gds"]
        if self.reader != "dali":
            del params["dali_input"]
        if self.engine == "iolab":  # the samples of iolab's loader carry what they carried before engine dlio
            del params["engine"], params["dlio_trace"]
        elif self.mlperf:  # what DLIO prefetched (dlio_file), not iolab's loader's
            params["prefetch_factor"] = mlperf_prefetch_factor(self.workers)
        return params

    def role_vars(self, target: str) -> dict[str, Any]:
        if self.engine == "dlio":
            return {
                "bench_dlio_target": target,
                "bench_dlio_workload": self.dlio_file(),
                "bench_dlio_ranks": self.accelerators,
                "bench_dlio_timeout": self.run_timeout(LOADER_TIMEOUT),
                "bench_dlio_trace": self.dlio_trace,
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

    def admissible(self, dataset_files: int | None, hosts: int) -> None:
        """A search whose probes could not each measure the step floor is refused: a rank under two batches an
        epoch at the ceiling (`probe_epochs`)."""
        if self.search and dataset_files is not None:
            probe_epochs(self, dataset_files, self.accelerators, hosts, step_floor())

    def commands(self) -> list[str]:
        runs = "a local tree's setup.py runs there"
        return super().commands() + pip_installs("dlio_requirement installs", self.dlio_requirement, runs)

    def describe(self) -> str:
        if self.engine == "dlio":
            assert self.accelerator is not None
            return (
                f"DLIO (dlio_benchmark under mpirun, one job over the hosts), reader threads {self.workers}, "
                f"batch {self.batch_size}, {self.epochs} epoch(s), {self.accelerators} emulated "
                f"{self.accelerator.type} per host ({self.accelerator.compute_time(self.batch_size):g} s per batch)"
                + (", traced (pydftracer)" if self.dlio_trace else "")
            )
        where = {"gpu": f"{self.gpus or 1} GPU(s) per host (NCCL)", "cpu": f"{self.gpus or 1} CPU rank(s) per host"}
        kind = "none" if self.accelerator is None else self.accelerator.type
        acc = "no accelerator" if self.accelerator is None else ""
        if kind in where:
            leg = "the synthetic ceiling (batch made on the device)" if self.data == "synthetic" else "real data"
            acc = f"ResNet-50 trained for real on {where[kind]}, DDP, {leg}"
        elif self.accelerator is not None:
            acc = (
                f"{self.accelerators} emulated {self.accelerator.label} "
                f"({self.accelerator.compute_time(self.batch_size):g} s per batch)"
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
    if w.accelerator is None or w.accelerator.type in REAL:
        raise ValueError("engine dlio emulates accelerators: add accelerator: {type: h100, model: unet3d} (or custom)")
    if w.reader not in DLIO_READERS:
        raise ValueError(f"engine dlio reads files as DLIO does: reader npz (unet3d) or pil (JPEG), not {w.reader}")
    for key in ("search", "syscall_profile", "preprocess_time"):  # (DLIO pins memory whatever pin_memory says)
        if getattr(w, key):
            raise ValueError(f"engine dlio runs DLIO as it is: {key} is iolab's loader's; drop it")
    if not w.decode:
        raise ValueError("engine dlio decodes as DLIO does: drop decode: false")


# What the pytorch role takes from the controller, by the name host_call gives it (bench_pytorch_<name>).
PYTORCH_VARS: tuple[str, ...] = ("target", "dataset", "options", "packs", "distributed", "timeout")
PYTORCH_VARS += ("master_addr", "master_port", "gloo_ifname", "s3")


def rendezvous_port(run_id: str) -> int:
    """A distributed job's rendezvous port, one per run (a job still closing cannot meet the next one's ranks)."""
    return 29500 + int(hashlib.sha1(run_id.encode()).hexdigest()[:4], 16) % 2000


def host_call(
    at: At,
    *,
    target: str,
    options: dict[str, Any],
    timeout: float,
    dataset: str = "",
    packs: list[str] | tuple[str, ...] = (),
    distributed: bool = False,
    master_addr: str = "",
    master_port: int = 0,
    gloo_ifname: str = "",
    s3: dict[str, Any] | None = None,
) -> HostCall:
    """A pytorch run's call on `host` (iolab.kinds.hostcall): iolab's loader (python -m
    iolab.kinds.pytorch.host); `distributed`, one DDP job over the play's hosts: this host's node rank is its
    place in the play, the rendezvous the first host's (127.0.0.1 when it is this machine) on a port of the run's
    own unless given; gloo's and NCCL's interface `gloo_ifname` where given; on an s3 backend, its connection `s3`
    as $IOLAB_S3 for reader s3 (where the keys are, never the keys: docs/DESIGN.md, "Secrets")."""
    root, prepare, run = loader_call("pytorch", at, target=target, dataset=dataset, timeout=timeout)
    prepare += [f"--pack={pack}" for pack in packs]
    prepare += ["--dali"] if options.get("reader") == "dali" else []
    tool = at.module(TOOL, "--root", root, "--out", at.run_dir)
    tool += ["--options", json.dumps(options)]
    if distributed:
        play = at.play
        address = master_addr or play.addresses[0]
        port = master_port if int(master_port) > 0 else rendezvous_port(play.run_id)
        tool += ["--distributed", "--nodes", str(len(play.hosts)), "--node-rank", str(play.hosts.index(at.host))]
        tool += ["--master-addr", address, "--master-port", str(port)]
    env = {"GLOO_SOCKET_IFNAME": gloo_ifname, "NCCL_SOCKET_IFNAME": gloo_ifname} if gloo_ifname else {}
    env |= {S3_ENV: json.dumps(s3)} if s3 else {}
    return HostCall(prepare, run, tool, env, LOADER_PREPARE_TASK, "Run the loader")
