"""What every workload kind has: a name, the page cache it starts with, a time limit, profilers."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from iolab.schema import Duration, Model, Name

LOADER_TIMEOUT = 1800.0  # seconds a loader or metadata run may take unless the campaign says otherwise


class Workload(Model):
    """What every workload has: a name, what the page cache holds when it starts, a time limit, profilers.

    cache: drop (the default: sync and drop caches before every run, on every host),
    keep (leave them as the run before left them), or warm (each run twice: cold,
    after a drop, then warm, after a warm-up — `warm_command` on each host, or a pass
    of the workload itself — so reports show cold and warm side by side).
    """

    name: Name
    cache: Literal["drop", "keep", "warm"] = "drop"
    warm_command: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = None
    warmup: bool = False  # one unrecorded run before a point's first measured one, per mount
    allow_caching: bool = False  # potential_caching becomes `overridden`: kept, but the sample stays valid
    timeout: Duration | None = None  # per run: the tool is stopped and the run recorded as failed after it
    # MLPerf Storage v3.0's rules mode (`mlperf: true` in the campaign file, iolab.workloads.mlperf.apply_rules):
    # the run does what the rules ask and its samples are checked against them (iolab.validity).
    mlperf_rules: bool = False
    # Sampling profilers while the tool runs, kept under raw/: perf (system-wide, with call
    # graphs: the kernel's storage stack too) and py-spy (the Python tool and its workers).
    profilers: list[Literal["perf", "py-spy"]] = []

    tool: ClassVar[str]  # each kind's: names its bench role (roles/bench_<tool>) and its parser

    @model_validator(mode="after")
    def _consistent_policies(self) -> Workload:
        if self.warm_command and self.cache != "warm":
            raise ValueError("warm_command is the warm-up of cache: warm; set cache: warm or drop warm_command")
        if "py-spy" in self.profilers and self.tool == "fio":
            raise ValueError("py-spy samples Python programs; fio is not one: use profilers: [perf]")
        return self

    def repetitions_of(self, campaign: int) -> int:
        """The runs of one of its points: a search's one, else the campaign's repetitions (each kind may say)."""
        return 1 if getattr(self, "search", None) else campaign

    def estimate_s(self) -> float | None:
        """How long one of its runs takes on the hosts, where the kind knows (the progress line's ETA)."""
        return None

    def run_timeout(self, default: float) -> float:
        return self.timeout or default

    def params(self) -> dict[str, Any]:
        """The fields a run's samples carry as parameters (iolab.validity tells settings from run sizes by name)."""
        return self.model_dump(exclude={"name", "type", "warm_command"}, exclude_none=True)

    def dataset_vars(self, root: str) -> dict[str, Any]:
        """Where a kind that reads the data set finds it, as its role's variables; nothing for the others."""
        return {}

    def describe(self) -> str:
        """What the kind runs on each host, in a line (--dry-run); each kind says more."""
        return self.tool

    def repetition_vars(self, repetition: int) -> dict[str, Any]:
        """Role variables that change with the repetition (a loader's shuffle seed under MLPerf's rules)."""
        return {}


class LoaderWorkload(Workload):
    """A kind whose tool is an iolab loader (iolab.host.loader): its role, roles/bench_<tool>, takes the loader's
    flags as one object (bench_<tool>_options, `--options JSON`), the target and the data set."""

    def loader_options(self, repetition: int = 1) -> dict[str, Any]:
        """The loader's flags, named as its flags are (each kind's)."""
        raise NotImplementedError

    def role_vars(self, target: str) -> dict[str, Any]:
        return {
            f"bench_{self.tool}_target": target,
            f"bench_{self.tool}_options": self.loader_options(),
            f"bench_{self.tool}_timeout": self.run_timeout(LOADER_TIMEOUT),
        }

    def dataset_vars(self, root: str) -> dict[str, Any]:
        return {f"bench_{self.tool}_dataset": root}

    def repetition_vars(self, repetition: int) -> dict[str, Any]:
        return {f"bench_{self.tool}_options": self.loader_options(repetition)}
