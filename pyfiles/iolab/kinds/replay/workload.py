"""Workload kind `replay`: a captured job's file I/O (a trace, iolab.shared.trace) played on each backend by fio."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from iolab.schema import Bool
from iolab.shared import trace as traces
from iolab.units import human
from iolab.workloads.base import INLINE_TEXT, LOADER_TIMEOUT, At, HostCall, Workload, does_not_fit


@functools.lru_cache(maxsize=8)
def _loaded(path: str, mtime_ns: int, size: int) -> tuple[traces.Trace, str]:
    """The checked trace, and its text where a call's argv can carry it (INLINE_TEXT; else '')."""
    return traces.load(path), Path(path).read_text() if size <= INLINE_TEXT else ""


def _cached(path: str) -> tuple[traces.Trace, str]:
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise traces.TraceError(
            f"{path}: cannot read the trace ({exc.strerror}); give the path of a .trace file"
        ) from None
    return _loaded(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


def loaded(path: str) -> traces.Trace:
    """The trace at `path`, checked once while the file is unchanged (a campaign validates its workloads often)."""
    return _cached(path)[0]


class ReplayWorkload(Workload):
    """A captured job's file I/O, replayed on each backend through fio's iolog replay (docs/TRACES.md).

    `trace` is a file of `./lab trace.capture` (or `trace.convert`): absolute, or relative to
    the directory iolab runs in. Each host stages the trace's files at their sizes under
    <target>/iolab-<host>/trace-<hash>, caches are dropped, and fio plays each traced process as a
    job of its own: `timing: recorded` keeps the recorded gaps between a process's I/Os (the run
    says how much later than recorded it ended: the stall), `fast` plays them back to back.
    `processes: N` plays N copies of each process, on the same files or (own_files) each on its own.
    """

    type: Literal["replay"]
    trace: Annotated[str, Field(min_length=1)]
    timing: Literal["recorded", "fast"] = "recorded"
    processes: Annotated[int, Field(ge=1, le=1024, strict=True)] = 1
    own_files: Bool = False

    @model_validator(mode="after")
    def _a_trace(self) -> ReplayWorkload:
        try:
            found = loaded(self.trace)
        except traces.TraceError as exc:
            raise ValueError(f"trace: {exc}") from None
        spaced = next((name for name, _ in found.files if any(c.isspace() for c in name)), None)
        if spaced is not None:
            raise ValueError(
                f"trace: file {spaced!r} has a blank in its name, which fio's iolog cannot carry (it reads names "
                "up to a blank); rename the files of the job's data"
            )
        return self

    @property
    def loaded(self) -> traces.Trace:
        return loaded(self.trace)

    @property
    def copies(self) -> int:
        """The copies of the trace's files a host stages: one, or one per process copy with own_files."""
        return self.processes if self.own_files else 1

    @property
    def room(self) -> int:
        """Bytes its staged files hold on the target, per host."""
        return self.loaded.dataset_bytes * self.copies

    def too_big(self, where: str, size: int) -> str | None:
        held = f"trace's data set ({human(self.room, 'B')} staged on each host)"
        fix = "; raise the backend's size" + (" or drop own_files" if self.copies > 1 else "")
        return does_not_fit(self.name, held, self.room, where, size, fix)

    @property
    def writes(self) -> str:
        written = self.loaded.bytes["write"]
        return f"the trace's writes ({human(written, 'B')})" if written else ""

    def params(self) -> dict[str, Any]:
        """The trace by its hash (the path is where it lay on the controller, not what was replayed)."""
        return {**super().params(), "trace": self.loaded.sha256[:16]}

    def role_vars(self, target: str) -> dict[str, Any]:
        return {
            "bench_replay_target": target,
            "bench_replay_trace": str(Path(self.trace).resolve()),
            "bench_replay_text": _cached(self.trace)[1],  # read once with the check, for every run's variables
            "bench_replay_hash": self.loaded.sha256[:16],
            "bench_replay_timing": self.timing,
            "bench_replay_processes": self.processes,
            "bench_replay_own_files": self.own_files,
            "bench_replay_copies": self.copies,
            "bench_replay_timeout": self.run_timeout(max(LOADER_TIMEOUT, 4 * self.loaded.span_us / 1e6)),
        }

    def dry_run(self, variables: dict[str, Any]) -> list[str]:
        """The base's lines, the trace's text said by its size and route rather than shown."""
        text = variables.get("bench_replay_text", "")
        said = f"<the trace's {len(text):,} characters, in the prepare's argv>" if text else "<copied by the role>"
        return super().dry_run({**variables, "bench_replay_text": said})

    def estimate(self) -> float | None:
        return self.loaded.span_us / 1e6 if self.timing == "recorded" else None

    def describe(self) -> str:
        found = self.loaded
        return (
            f"replay of trace {found.sha256[:16]} ({found.records:,} I/Os of {len(found.processes)} processes: "
            f"{human(found.bytes['read'], 'B')} read, {human(found.bytes['write'], 'B')} written in "
            f"{found.span_us / 1e6:.2f} s as recorded; {len(found.files):,} files, "
            f"{human(found.dataset_bytes, 'B')}) through fio's iolog replay, "
            + ("at its recorded timing" if self.timing == "recorded" else "as fast as the storage allows")
            + (f", {self.processes} copies of each process" if self.processes > 1 else "")
            + (" on files of their own" if self.own_files and self.processes > 1 else "")
        )


# What replay's bench role takes from the controller (execute.workload_vars), by the name host_call gives it.
REPLAY_VARS = ("target", "trace", "text", "hash", "timing", "processes", "own_files", "copies", "timeout")


def copied(variables: dict[str, Any]) -> str | None:
    """What replay's bench role copies to a host first: a trace too long for the prepare's argv, which its variables
    carry no text of (ReplayWorkload.role_vars; hostcall.Kind)."""
    return None if variables.get("text") else f"a trace over {INLINE_TEXT >> 10} KiB is copied by Ansible"


def host_call(
    at: At,
    *,
    target: str,
    trace: str,
    text: str,
    hash: str,
    timing: str,
    processes: int,
    own_files: bool,
    copies: int,
    timeout: float,
) -> HostCall:
    """A replay's call on `at.host` (iolab.kinds.hostcall): `prepare` is iolab.host.trace stage (the trace written
    beside the run directory from `text`, its files staged under <target>/iolab-<host>/trace-<hash>, the caches
    dropped), the tool its replay through fio. A trace too long for the argv (`text` empty, INLINE_TEXT) is copied
    there from `trace`, the controller's copy, by the bench role (the fan-out refuses such a run)."""
    root, file = f"{target}/iolab-{at.host}/trace-{hash}", f"{at.run_dir}.trace"
    prepare = at.module("iolab.host.trace", "stage", "--trace", file, "--root", root, "--copies", str(copies))
    prepare += [*(["--text", text] if text else []), "--dir", at.run_dir, *(["--drop-caches"] if at.drop else [])]
    run = at.hostrun("--target", target, "--timeout", str(timeout), "--telemetry-after", "0")
    tool = at.module("iolab.host.trace", "replay", "--trace", file, "--root", root, "--out", at.run_dir)
    tool += ["--timing", timing, "--processes", str(processes), *(["--own-files"] if own_files else [])]
    return HostCall(
        prepare, run, tool, {}, "Stage the trace's files, then drop the caches", "Replay the trace through fio"
    )
