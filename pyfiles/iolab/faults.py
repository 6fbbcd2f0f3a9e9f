"""Faults a campaign injects into the storage under test while a run measures it: the `faults:` of a workload.

    workloads:
      - {name: seq, type: fio, profile: seq-read-1m, runtime: 40s,
         faults: [{at: 10s, what: osd_stop, osd: 0, heal_at: 30s}]}

Each fault is applied `at` seconds after the run's common start (the time T every host of the run starts its
tool at: iolab_host's sync_start; a fault at 10 s is at T + 10 s on the controller's clock) and healed at
`heal_at` (or, left out, by the run's teardown). The kinds:

    osd_out, osd_down   ceph osd out N / ceph osd set noup + ceph osd down N   heal: osd in N / unset noup
    osd_stop            the OSD's process, by the PID the lab's service wrote   heal: started again, as the role does
    noout               ceph osd set noout                                      heal: ceph osd unset noout
    nfs_stop, rgw_stop  nfs-ganesha or radosgw of the lab's services, by PID   heal: started again
    link_down           a client host's link (a simulated host's namespace; a real host's iolab_link_down argv
                        from the inventory, run on the controller)          heal: iolab_link_up
    tool_kill           the run's tool on a client host (SIGKILL to its process group)    no heal
    command             an argv of the campaign's (never a shell; only with --allow-commands)   heal: heal_argv

Ceph's kinds need a Ceph backend (rbd, rbd_snapshot, cephfs), nfs_stop an nfs backend, rgw_stop an s3 one: a
fault the backend does not have is refused when the campaign loads (`refusal`). The injector is iolab.drive.injector;
what a run's clients felt is iolab.parsers.faults'. This module is the schema and what a dry run says.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from pydantic import Field, model_validator

from iolab.schema import AbsPath, Duration, HostName, Model

# Seconds of the rate a run must measure before its first fault: the baseline is their median.
BASELINE_MIN_S = 3.0
CEPH_KINDS = ("osd_out", "osd_down", "osd_stop", "noout")


class _Fault(Model):
    """When: `at` seconds after the run's common start; healed at `heal_at` (None: by the run's teardown)."""

    if TYPE_CHECKING:  # every kind declares it, with its own literal
        what: str

    at: Duration
    heal_at: Duration | None = None

    @model_validator(mode="after")
    def _heal_after(self) -> _Fault:
        if self.heal_at is not None and self.heal_at <= self.at:
            raise ValueError(f"heal_at ({self.heal_at:g} s) must come after at ({self.at:g} s)")
        return self

    def target(self) -> str:
        """What the fault acts on, in a few words (its records and reports name it)."""
        return ""

    def describe(self) -> str:
        heal = f", healed at {self.heal_at:g} s" if self.heal_at is not None else ", healed by the run's teardown"
        return f"{self.what} {self.target()} at {self.at:g} s{heal}".replace("  ", " ")


class OsdFault(_Fault):
    """An OSD marked out, marked down (held down with noup), or its process stopped."""

    what: Literal["osd_out", "osd_down", "osd_stop"]
    osd: Annotated[int, Field(ge=0)] = 0
    # osd_stop: the lab's Ceph service directory (client.json, run/*.pid); default: the backend's ceph_conf's
    service_dir: AbsPath | None = None

    def target(self) -> str:
        return f"osd.{self.osd}"


class NooutFault(_Fault):
    """Ceph's noout flag set (OSDs that go down are not marked out)."""

    what: Literal["noout"]


class DaemonFault(_Fault):
    """A daemon of the lab's services stopped by the PID it wrote, and started again as its role starts it."""

    what: Literal["nfs_stop", "rgw_stop"]
    # The service's directory (client.json; the PID files under run/): default, where the backend's own
    # settings point (rgw: the credentials' directory), else the lab's default (/var/lib/iolab/nfs).
    service_dir: AbsPath | None = None

    def target(self) -> str:
        return {"nfs_stop": "nfs-ganesha", "rgw_stop": "radosgw"}[self.what]


class HostFault(_Fault):
    """A client host's link taken down, or the run's tool on it killed."""

    what: Literal["link_down", "tool_kill"]
    host: HostName

    @model_validator(mode="after")
    def _no_heal_for_a_kill(self) -> HostFault:
        if self.what == "tool_kill" and self.heal_at is not None:
            raise ValueError("tool_kill has no heal (the tool is not started again): drop heal_at")
        return self

    def target(self) -> str:
        return f"on {self.host}"


class CommandFault(_Fault):
    """The campaign's own command (an argv, never a shell) and the one that heals it."""

    what: Literal["command"]
    argv: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    heal_argv: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _heal_pairs(self) -> CommandFault:
        if (self.heal_at is None) != (self.heal_argv is None):
            raise ValueError("a command fault heals with heal_argv at heal_at: give both, or neither")
        return self

    def target(self) -> str:
        return shlex.join(self.argv)


class _Backend(Protocol):  # what refusal reads of a backend (iolab.backends.base.Backend)
    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def fault_kinds(self) -> tuple[str, ...]: ...


class _Workload(Protocol):  # what this module reads of a workload (iolab.workloads.base.Workload)
    @property
    def name(self) -> str: ...
    @property
    def faults(self) -> Sequence[Any]: ...

    def estimate(self) -> float | None: ...


AnyFault = Annotated[OsdFault | NooutFault | DaemonFault | HostFault | CommandFault, Field(discriminator="what")]
Faults = Annotated[list[AnyFault], Field(max_length=16)]


def problem(workload: _Workload) -> str | None:
    """Why a workload's faults cannot be measured (a campaign error), or None: a fault before the baseline (fio's
    ramp and BASELINE_MIN_S of the rate), a fault or heal past the run's end where the campaign says how long a run
    lasts (Workload.estimate: fio's ramp + runtime, a KV-cache trial's duration), a search. A run whose length
    the storage decides (a loader's epochs) is checked after it (iolab.drive.injector: a fault that never fired)."""
    if not workload.faults:
        return None
    if getattr(workload, "jobfile", None):
        return "faults: their figures read the per-second log iolab's fio profiles write; a job file's is not read"
    if getattr(workload, "search", None) is not None:
        return "faults: an accelerator search probes many times; put faults on a workload without search"
    first = min(f.at for f in workload.faults)
    ramp = float(getattr(workload, "ramp", 0.0) or 0.0)
    if first < ramp + BASELINE_MIN_S:
        return (
            f"faults: the first fault at {first:g} s leaves under {BASELINE_MIN_S:g} s of the rate after the ramp "
            f"({ramp:g} s) for the baseline it is measured against; inject at {ramp + BASELINE_MIN_S:g} s or later"
        )
    ends = workload.estimate()
    late = [f for f in workload.faults if ends is not None and max(f.at, f.heal_at or 0.0) >= ends]
    if late:
        return (
            f"faults: {late[0].describe()} falls at or past the run's end ({ends:g} s: {_length(workload)}); "
            f"lengthen {'the duration' if hasattr(workload, 'duration') else 'runtime'} or move the fault"
        )
    return None


def _length(workload: _Workload) -> str:
    """What a run's expected length (Workload.estimate) is made of, in words."""
    if hasattr(workload, "duration"):  # KV-cache: a trial's, and the ranks' start and end
        return "the trial's duration and about 10 s of its ranks' start and end"
    return "ramp + runtime"


# Where each kind is found (a backend's fault_kinds says which it has): refusal's words.
HOMES = {
    **dict.fromkeys(CEPH_KINDS, "a Ceph backend (rbd, rbd_snapshot, cephfs)"),
    "nfs_stop": "an nfs backend (the lab's nfs-ganesha)",
    "rgw_stop": "an s3 backend (the lab's radosgw)",
}
EVERYWHERE = ("link_down", "tool_kill", "command")  # every backend has these: they act on the client or anything


def refusal(backend: _Backend, workload: _Workload) -> str | None:
    """Why `backend` cannot have one of `workload`'s faults (a campaign error, before anything starts), or None."""
    for index, fault in enumerate(workload.faults):
        if fault.what not in backend.fault_kinds:
            return (
                f"workload {workload.name}: faults[{index}] {fault.what} needs {HOMES[fault.what]}, and backend "
                f"{backend.name} is {backend.type}; give the fault to a workload of its own that runs there"
            )
    return None


def commands(workload: _Workload) -> list[str]:
    """The campaign's own commands among the faults, as sentences (Workload.commands: --allow-commands)."""
    said = []
    for fault in workload.faults:
        if isinstance(fault, CommandFault):
            said.append(f"faults run {shlex.join(fault.argv)!r} on the controller at {fault.at:g} s")
            if fault.heal_argv:
                said.append(f"faults run {shlex.join(fault.heal_argv)!r} on the controller at {fault.heal_at:g} s")
    return said


def describe(workload: _Workload) -> list[str]:
    """--dry-run's lines on a workload's faults."""
    if not workload.faults:
        return []
    return [
        "faults, on the clock of the run's common start (each run plays alone; the rate before the first is the "
        "baseline; the data set is verified after): " + "; ".join(f.describe() for f in workload.faults)
    ]
