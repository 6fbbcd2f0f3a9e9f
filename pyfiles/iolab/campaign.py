"""Campaign files: loaded once into typed objects, expanded into runs.

A campaign names what to compare (DESIGN.md). Workload parameters given as a
list sweep (cartesian product); every (backend, workload parameters,
repetition) becomes a `Run` whose id is a hash of its full configuration, so
the same file always yields the same run ids and a resumed campaign skips what
is already stored.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

import yaml
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field,
                      ValidationError, model_validator)

from iolab import fio_jobs
from iolab.errors import UserError
from iolab.units import parse_duration, parse_size

MOUNT_ROOT = "/mnt/iolab"


def _name(value: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", value):
        raise ValueError(f"{value!r} is not a valid name: use letters, digits, '.', '_' and '-' "
                         "(names become directory and mount names)")
    return value


def _absolute(value: str) -> str:
    if not value.startswith("/") or "\n" in value or "/../" in value + "/":
        raise ValueError(f"{value!r} must be an absolute path without '..'")
    if ":" in value:
        raise ValueError(f"{value!r}: paths may not contain ':' (fio reads it as a file name separator)")
    return value.rstrip("/") or "/"


def _ramp(value: object) -> float:
    return 0.0 if value in (0, "0", "0s") else parse_duration(value)  # no ramp is a valid choice


Name = Annotated[str, AfterValidator(_name)]
Size = Annotated[int, BeforeValidator(parse_size)]
Duration = Annotated[float, BeforeValidator(parse_duration)]
AbsPath = Annotated[str, AfterValidator(_absolute)]
Ramp = Annotated[float, BeforeValidator(_ramp)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TmpfsBackend(_Model):
    """A tmpfs of `size` mounted on each host (memory: the ceiling of a host's own storage)."""
    name: Name
    type: Literal["tmpfs"]
    size: Size
    mountpoint: AbsPath | None = None

    @property
    def target(self) -> str:
        return self.mountpoint or f"{MOUNT_ROOT}/{self.name}"


class LocalBackend(_Model):
    """A directory on a file system the host already has (local NVMe, an existing mount)."""
    name: Name
    type: Literal["local"]
    path: AbsPath

    @property
    def target(self) -> str:
        return self.path


Backend = Annotated[Union[TmpfsBackend, LocalBackend], Field(discriminator="type")]
BACKEND_TYPES = {"tmpfs": TmpfsBackend, "local": LocalBackend}


class FioWorkload(_Model):
    """fio with a built-in profile or the user's own job file."""
    name: Name
    type: Literal["fio"]
    profile: str | None = None
    jobfile: str | None = None
    runtime: Duration = 10.0
    ramp: Ramp = 2.0
    size: Size | None = None          # per host; default: what fits the backend, up to 1 GiB
    iodepth: Annotated[int, Field(ge=1, le=4096)] | None = None
    numjobs: Annotated[int, Field(ge=1, le=256)] = 1
    ioengine: Literal["libaio", "io_uring", "psync", "sync", "posixaio"] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> FioWorkload:
        if (self.profile is None) == (self.jobfile is None):
            raise ValueError("give either profile (one of: " + ", ".join(fio_jobs.PROFILES)
                             + ") or jobfile: PATH, not both or neither")
        if self.profile is not None and self.profile not in fio_jobs.PROFILES:
            raise ValueError(f"unknown fio profile {self.profile!r} (expected one of: "
                             + ", ".join(fio_jobs.PROFILES) + ", or jobfile: PATH)")
        return self

    tool: ClassVar[str] = "fio"     # names the role (bench_fio) and the parser (parsers/fio.py)

    def role_vars(self, target: str) -> dict[str, Any]:
        """The bench_fio role's variables for a run of this workload on `target`."""
        options: dict[str, Any] = {"time_based": "1", "runtime": f"{self.runtime:g}", "ramp_time": f"{self.ramp:g}"}
        options.update({k: getattr(self, k) for k in ("iodepth", "numjobs", "ioengine")
                        if getattr(self, k) is not None})
        if self.profile:
            options = fio_jobs.profile_options(self.profile, options)
        return {"bench_fio_options": options, "bench_fio_jobfile": self.jobfile or "",
                "bench_fio_size": self.size or 0, "bench_fio_target": target,
                "bench_fio_timeout": self.runtime + self.ramp + 120, "bench_fio_telemetry_after": self.ramp}


Workload = Annotated[Union[FioWorkload], Field(discriminator="type")]
WORKLOAD_TYPES = {"fio": FioWorkload}


class Campaign(_Model):
    name: Name
    description: str = ""
    repetitions: Annotated[int, Field(ge=1, le=100)] = 1
    # Client-count sweep: each run also on the first 1, 2, 4 … selected hosts, to find saturation.
    hosts_sweep: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1)] | None = None
    # A host unreachable at the start: leave it out (skip) or stop the campaign (abort).
    on_host_failure: Literal["skip", "abort"] = "skip"
    backends: Annotated[list[Backend], Field(min_length=1)]
    workloads: Annotated[list[Workload], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_names(self) -> Campaign:
        _unique("backend", [b.name for b in self.backends])
        # A swept workload is several points of one name; two identical points are a mistake.
        _unique("workload", [w.model_dump_json() for w in self.workloads])
        return self


def _unique(kind: str, names: list[str]) -> None:
    doubles = sorted({n for n in names if names.count(n) > 1})
    if doubles:
        raise ValueError(f"{kind} names must be unique; repeated: {', '.join(doubles)}")


class Run(_Model):
    """One execution: a backend, one point of a workload's sweep, one repetition (on `hosts` hosts)."""
    run_id: str
    campaign: str
    backend: Backend
    workload: Workload
    repetition: int
    hosts: int | None = None           # a hosts_sweep point: the first N selected hosts

    @property
    def params(self) -> dict[str, Any]:
        params = self.workload.model_dump(exclude={"name", "type"}, exclude_none=True)
        return {**params, "hosts": self.hosts} if self.hosts else params

    def on(self, selected: list[str]) -> list[str]:
        """The hosts this run runs on, of the selected ones."""
        return selected[: self.hosts] if self.hosts else list(selected)


def run_id(campaign: str, backend: BaseModel, workload: BaseModel, repetition: int, hosts: int | None = None) -> str:
    config = {"campaign": campaign, "backend": backend.model_dump(), "workload": workload.model_dump(),
              "repetition": repetition, **({"hosts": hosts} if hosts else {})}
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]


def _sweep(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """{'bs': ['4k', '1M'], 'rw': 'read'} → [{'bs': '4k', 'rw': 'read'}, {'bs': '1M', 'rw': 'read'}]."""
    keys = [k for k, v in raw.items() if isinstance(v, list)]
    if not keys:
        return [raw]
    points = []
    for values in itertools.product(*(raw[k] for k in keys)):
        points.append({**raw, **dict(zip(keys, values))})
    return points


def expand(campaign: Campaign, selected_hosts: int | None = None) -> list[Run]:
    """Every run of a campaign, in order: backend, workload, sweep point, host count, repetition.

    `selected_hosts` (how many hosts the command selected) checks a hosts_sweep against it.
    """
    counts: list[int | None] = list(campaign.hosts_sweep or [None])
    if selected_hosts is not None and campaign.hosts_sweep and max(campaign.hosts_sweep) > selected_hosts:
        raise UserError(f"campaign {campaign.name}: hosts_sweep asks for {max(campaign.hosts_sweep)} hosts but "
                        f"only {selected_hosts} are selected; select more with --hosts or lower hosts_sweep")
    runs = []
    for backend in campaign.backends:
        for workload in campaign.workloads:
            for count in counts:
                for rep in range(1, campaign.repetitions + 1):
                    runs.append(Run(run_id=run_id(campaign.name, backend, workload, rep, count),
                                    campaign=campaign.name, backend=backend, workload=workload,
                                    repetition=rep, hosts=count))
    return runs


def _where(loc: tuple) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in BACKEND_TYPES or part in WORKLOAD_TYPES or part.startswith("function-"):
            continue  # the tag of a discriminated union, or a validator's name
        else:
            text += f".{part}" if text else part
    return text or "(top level)"


def _expected_keys(raw: dict[str, Any], loc: tuple) -> str:
    if len(loc) >= 3 and loc[0] in ("backends", "workloads") and isinstance(loc[1], int):
        registry = BACKEND_TYPES if loc[0] == "backends" else WORKLOAD_TYPES
        model = registry.get(str(loc[2]))
    elif len(loc) == 1:
        model = Campaign
    else:
        model = None
    return f" (expected one of: {', '.join(model.model_fields)})" if model else ""


def _message(error: dict[str, Any], raw: dict[str, Any]) -> str:
    kind, loc = error["type"], error["loc"]
    if kind == "extra_forbidden":
        return f"{_where(loc)}: unknown key{_expected_keys(raw, loc)}"
    if kind == "union_tag_invalid":
        what = "backend" if loc[0] == "backends" else "workload"
        expected = ", ".join(BACKEND_TYPES if what == "backend" else WORKLOAD_TYPES)
        return f"{_where(loc)}.type: unknown {what} type {error['ctx']['tag']!r} (expected one of: {expected})"
    if kind == "union_tag_not_found":
        return f"{_where(loc)}: missing key 'type'"
    if kind == "missing":
        return f"{_where(loc)}: missing required key"
    message = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return f"{_where(loc)}: {message}"


def _no_templates(value: Any, source: str, where: str) -> None:
    """Campaign values reach Ansible as variables: a Jinja expression there would be evaluated."""
    if isinstance(value, dict):
        for key, item in value.items():
            _no_templates(item, source, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_templates(item, source, f"{where}[{index}]")
    elif isinstance(value, str) and any(mark in value for mark in ("{{", "{%", "{#")):
        raise UserError(f"{source}: {where}: template markers ({{{{, {{%, {{#) are not allowed in campaign "
                        "values; write the value literally")


def parse(raw: Any, source: str, base_dir: Path) -> Campaign:
    """Validate a campaign mapping; `source` names the file in errors."""
    if not isinstance(raw, dict):
        raise UserError(f"{source}: a campaign file must be a YAML mapping (name:, backends:, workloads:), "
                        f"got {type(raw).__name__}")
    _no_templates(raw, source, "")
    data = dict(raw)
    if isinstance(data.get("workloads"), list):
        try:
            _unique("workload", [w.get("name") for w in data["workloads"] if isinstance(w, dict)])
        except ValueError as exc:
            raise UserError(f"{source}: workloads: {exc}") from None
        data["workloads"] = [p for w in data["workloads"] for p in (_sweep(w) if isinstance(w, dict) else [w])]
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as exc:
        problems = [_message(e, data) for e in exc.errors()]
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise UserError(f"{source}: " + "; ".join(problems[:3]) + more) from None
    return _resolve_jobfiles(campaign, source, base_dir)


def _resolve_jobfiles(campaign: Campaign, source: str, base_dir: Path) -> Campaign:
    workloads = []
    for index, workload in enumerate(campaign.workloads):
        if isinstance(workload, FioWorkload) and workload.jobfile:
            path = (base_dir / workload.jobfile).resolve()
            try:
                fio_jobs.check_jobfile(path)
            except ValueError as exc:
                raise UserError(f"{source}: workloads[{index}].jobfile: {exc}") from None
            workload = workload.model_copy(update={"jobfile": str(path)})
        workloads.append(workload)
    return campaign.model_copy(update={"workloads": workloads})


def load(path: str | Path) -> Campaign:
    """Read and validate a campaign file; every error names the file and the key."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"campaign file {path} does not exist; pass --campaign with a file "
                        "such as campaigns/quick.yml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read campaign file {path}: {exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    return parse(raw, str(path), path.parent)
