"""Workload kind `fio`: fio with a built-in profile or the user's own job file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from iolab.backends.base import DATASET_DIR, Backend
from iolab.backends.tmpfs import TmpfsBackend
from iolab.errors import UserError
from iolab.schema import Duration, Ramp, Size
from iolab.shared import fio_jobfile, fio_options
from iolab.workloads.base import INLINE_TEXT, At, HostCall, Workload


class FioWorkload(Workload):
    """fio with a built-in profile or the user's own job file."""

    type: Literal["fio"]
    profile: str | None = None
    jobfile: str | None = None
    # The job file as checked (fio_jobfile: includes inlined), set by _resolve_jobfiles; hosts get this text.
    jobtext: Annotated[str | None, Field(exclude=True)] = None
    runtime: Duration = 10.0
    ramp: Ramp = 2.0
    # Per host; default: what fits the backend, up to 1 GiB. With a job file: the most it may lay out
    # per host (its own sizes are kept; more is refused, as is more than the target holds).
    size: Size | None = None
    iodepth: Annotated[int, Field(ge=1, le=4096)] | None = None
    numjobs: Annotated[int, Field(ge=1, le=256)] = 1
    ioengine: Literal["libaio", "io_uring", "psync", "sync", "posixaio"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _not_jobtext(cls, data: Any) -> Any:
        if isinstance(data, dict) and "jobtext" in data:
            raise ValueError("jobtext is iolab's checked copy of jobfile; give jobfile: PATH")
        return data

    @model_validator(mode="after")
    def _one_source(self) -> FioWorkload:
        if (self.profile is None) == (self.jobfile is None):
            raise ValueError(
                "give either profile (one of: "
                + ", ".join(fio_options.PROFILES)
                + ") or jobfile: PATH, not both or neither"
            )
        if self.profile is not None and self.profile not in fio_options.PROFILES:
            raise ValueError(
                f"unknown fio profile {self.profile!r} (expected one of: "
                + ", ".join(fio_options.PROFILES)
                + ", or jobfile: PATH)"
            )
        return self

    @property
    def uses_dataset(self) -> bool:
        return self.profile == fio_options.BSSPLIT_FROM_DATASET

    @property
    def writes(self) -> str:
        """What makes the job write to the target ('' when it only reads)."""
        if self.jobtext:
            option = fio_jobfile.writes(fio_jobfile.parse_text(self.jobtext, "jobtext"))
            return f"job file {self.jobfile}, {option}" if option else ""
        rw = fio_options.PROFILES[self.profile].get("rw", "read") if self.profile else "read"
        return f"profile {self.profile}, rw={rw}" if rw not in ("read", "randread") else ""

    def room_refusal(self, backend: Backend) -> str | None:
        """Why the job file cannot lay out its files (fio_jobfile.layout) on `backend`: more than the
        workload's size, or than a tmpfs backend holds (other backends' room is checked on the hosts)."""
        if not self.jobtext:
            return None
        holds = backend.size if isinstance(backend, TmpfsBackend) else None
        where = f"tmpfs backend {backend.name}"
        try:
            fio_options.jobfile_room(fio_jobfile.parse_text(self.jobtext, "jobtext"), self.size or 0, holds, where)
        except ValueError as exc:
            return f"workload {self.name}, job file {self.jobfile}: {exc}"
        return None

    def role_vars(self, target: str) -> dict[str, Any]:
        """The bench_fio role's variables for a run of this workload on `target`."""
        options: dict[str, Any] = {"time_based": "1", "runtime": f"{self.runtime:g}", "ramp_time": f"{self.ramp:g}"}
        options.update(
            {k: getattr(self, k) for k in ("iodepth", "numjobs", "ioengine") if getattr(self, k) is not None}
        )
        if self.profile:
            options = fio_options.profile_options(self.profile, options)
        if self.faults:  # an I/O error the fault causes is counted (the clients' errors), not the run's end
            options["continue_on_error"] = "io"
        devices = fio_jobfile.devices(fio_jobfile.parse_text(self.jobtext, "jobtext")) if self.jobtext else []
        return {
            "bench_fio_options": options,
            "bench_fio_jobtext": self.jobtext or "",
            "bench_fio_allow_devices": devices,
            "bench_fio_size": self.size or 0,
            "bench_fio_target": target,
            "bench_fio_timeout": self.run_timeout(self.runtime + self.ramp + 120),
            "bench_fio_telemetry_after": self.ramp,
            # Relative to the host's work directory, <target>/iolab-<host>: its data set.
            "bench_fio_bssplit_from": DATASET_DIR if self.uses_dataset else "",
            **({"bench_fio_common_start": True} if self.faults else {}),  # the faults' clock, even on one host
        }

    def dataset_vars(self, root: str) -> dict[str, Any]:
        """Where the data set is when every host reads one copy at `root` ('' : each host its own)."""
        return {"bench_fio_bssplit_from": root or DATASET_DIR} if self.uses_dataset else {}

    def estimate(self) -> float | None:
        return self.runtime + self.ramp

    def dry_run(self, variables: dict[str, Any]) -> list[str]:
        """fio's command on each host and its job file as it will be written there."""
        if variables.get("bench_fio_jobtext"):  # the user's job file as checked, includes inlined
            job = f"; {self.jobfile}, run in <target>/iolab-<host>\n" + variables["bench_fio_jobtext"]
        else:
            bssplit = (
                {"bssplit": "<from the data set's size histogram>"} if variables.get("bench_fio_bssplit_from") else {}
            )
            job = fio_options.render(
                {
                    **variables["bench_fio_options"],
                    **bssplit,
                    "filename": "<target>/iolab-<host>/" + fio_options.DATA_FILE,
                    "size": str(variables["bench_fio_size"] or "<fits>"),
                },
                "iolab",
            )
        return [
            "on each host: fio --output=fio.json --output-format=json+ --eta=always job.fio, where job.fio is:",
            *["  " + line for line in job.splitlines() if line],
        ]


def single_run(
    backends: list[Backend], backend: str | None, profile: str, runtime: str, ramp: str, size: str | None
) -> dict[str, Any]:
    """`bench.fio`'s one-run campaign 'fio-<backend>' as a campaign mapping (iolab.campaign.model.parse checks it as it
    checks a file): a profile or a job file on one of a campaign's `backends` (the first by default)."""
    names = [b.name for b in backends]
    chosen = backend or names[0]
    if chosen not in names:
        raise UserError(f"backend {chosen!r} is not in the campaign (it has: {', '.join(names)}); pass --backend NAME")
    workload: dict[str, Any] = {
        "name": Path(profile).stem if profile not in fio_options.PROFILES else profile,
        "type": "fio",
        "runtime": runtime,
        "ramp": ramp,
        **({"size": size} if size else {}),
    }
    if profile in fio_options.PROFILES:
        workload["profile"] = profile
    elif Path(profile).exists():
        workload["jobfile"] = str(Path(profile).resolve())
    else:
        raise UserError(
            f"--profile {profile!r} is neither a fio profile ({', '.join(fio_options.PROFILES)}) "
            "nor an existing job file"
        )
    chosen_backend = next(b for b in backends if b.name == chosen).model_dump(exclude_none=True)
    return {"name": f"fio-{chosen}", "backends": [chosen_backend], "workloads": [workload]}


# What fio's bench role takes from the controller (execute.workload_vars), by the name host_call gives it.
FIO_VARS = (
    *("options", "jobtext", "allow_devices", "size", "target", "timeout", "bssplit_from", "telemetry_after"),
    "common_start",  # the role's (a faulted run's prepare and run in two tasks); a fan-out call always has one
)


def copied(variables: dict[str, Any]) -> str | None:
    """What fio's bench role copies to a host first: a job file too long for the prepare's argv (hostcall.Kind)."""
    if len(variables.get("jobtext") or "") > INLINE_TEXT:
        return f"a job file over {INLINE_TEXT >> 10} KiB is copied by Ansible"
    return None


def host_call(
    at: At,
    *,
    options: dict[str, Any],
    jobtext: str,
    allow_devices: list[str],
    size: int,
    target: str,
    timeout: float,
    bssplit_from: str,
    telemetry_after: float,
    common_start: bool = False,
) -> HostCall:
    """A fio run's call on `host` (iolab.kinds.hostcall): `prepare` is iolab.kinds.fio.host (size, lay out, drop
    the caches), the tool fio on the job it wrote. Each host works in <target>/iolab-<host> (hosts may share it)."""
    run_dir, workdir = at.run_dir, f"{target}/iolab-{at.host}"
    prepare = at.module("iolab.kinds.fio.host", "prepare", "--dir", run_dir, "--workdir", workdir)
    prepare += ["--options", json.dumps(options), "--size", str(size)]
    # A user's job file, as the controller checked it: in the argv (the prepare writes it as user.fio), unless it
    # is too long for one (the bench role then copies it there: the fan-out refuses such a run)
    if jobtext:
        prepare += ["--jobtext", jobtext] if len(jobtext) <= INLINE_TEXT else ["--jobfile", f"{run_dir}/user.fio"]
    prepare += [f"--allow-device={device}" for device in allow_devices]
    prepare += ["--bssplit-from", bssplit_from] if bssplit_from else []
    prepare += ["--drop-caches"] if at.drop else []
    run = at.hostrun("--target", target, "--timeout", str(timeout), "--cwd", workdir)
    run += ["--telemetry-after", str(telemetry_after)]
    tool = ["fio", f"--output={run_dir}/fio.json", "--output-format=json+", "--eta=always", f"{run_dir}/job.fio"]
    return HostCall(prepare, run, tool, {}, "Size, write and lay out the job, then drop the caches", "Run fio")
