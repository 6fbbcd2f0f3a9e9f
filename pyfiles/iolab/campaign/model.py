"""Campaign files: loaded once into typed objects, expanded into runs.

A campaign names what to compare (docs/DESIGN.md). Workload parameters given as a
list sweep (cartesian product); every (backend, workload parameters,
repetition) becomes a `Run` whose id is a hash of its full configuration, so
the same file always yields the same run ids and a resumed campaign skips what
is already stored.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, ValidationError, model_validator

from iolab import faults, yamlfile
from iolab.backends import BACKEND_TYPES, AnyBackend
from iolab.campaign import presets
from iolab.campaign.results_url import campaign_url
from iolab.campaign.sweeps import check_size, sweep, workload_defaults
from iolab.errors import UserError
from iolab.kinds.fio.workload import FioWorkload
from iolab.kinds.kvcache import workload as kvcache
from iolab.kinds.registry import WORKLOAD_TYPES, AnyWorkload
from iolab.schema import AbsPath, Bool, Dataset, Duration, Model, Name, kinds
from iolab.shared import fio_jobfile
from iolab.shared.confine import MOUNT_ROOT, refusal
from iolab.workloads import mlperf
from iolab.workloads.accelerator import Accelerator
from iolab.workloads.base import setup_installs

# The runs a campaign may make before it is refused as a mistake (bench.all --max-runs raises it; its workloads
# and backends: iolab.campaign.sweeps).
MAX_RUNS = 10_000


class Campaign(Model):
    name: Name
    description: str = ""
    repetitions: Annotated[int, Field(ge=1, le=100)] = 1
    # Repeats that disagree (figures of merit more than 5% apart) get more runs, up to this many in all.
    max_repetitions: Annotated[int, Field(ge=1, le=100)] | None = None
    # as-written, or random: each backend's runs shuffled (seeded: the same order every time), so a
    # drift over the campaign (a filling cache tier, a neighbour's load) spreads over every setting.
    order: Literal["as-written", "random"] = "as-written"
    order_seed: int = 0
    # Where backends without a mountpoint of their own are mounted: <mount_root>/<backend name>.
    mount_root: AbsPath = MOUNT_ROOT
    # Defaults for every workload that does not set its own (see _Workload).
    cache: Literal["drop", "keep", "warm"] | None = None
    warm_command: list[str] | None = None
    warmup: Bool | None = None
    allow_caching: Bool | None = None
    timeout: Duration | None = None
    start_skew_max: Duration | None = None
    # Client-count sweep: each run also on the first 1, 2, 4 … selected hosts, to find saturation.
    hosts_sweep: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1)] | None = None
    # A host unreachable at the start: leave it out (skip) or stop the campaign (abort).
    on_host_failure: Literal["skip", "abort"] = "skip"
    # MLPerf Storage v3.0's rules for every workload (each may say `mlperf: true` itself): iolab.workloads.mlperf.
    mlperf: Bool = False
    # A PostgreSQL server each run's results go to as the run ends (iolab.results.publish); no password here.
    results_db: Annotated[str, AfterValidator(campaign_url)] | None = None
    backends: Annotated[list[AnyBackend], Field(min_length=1)]
    dataset: Dataset | None = None
    workloads: Annotated[list[AnyWorkload], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_names(self) -> Campaign:
        if self.max_repetitions is not None and self.max_repetitions < self.repetitions:
            raise ValueError(
                f"max_repetitions ({self.max_repetitions}) is below repetitions ({self.repetitions}): "
                "it caps the repetitions run when repeats disagree"
            )
        _unique("backend", [b.name for b in self.backends])
        root_refused = refusal(self.mount_root, "mount_root")
        if root_refused:
            raise ValueError(root_refused)
        for index, backend in enumerate(self.backends):
            for field, path, existing in backend.places():
                reason = refusal(path, f"backends[{index}].{field}", self.mount_root, existing)
                if reason:
                    raise ValueError(reason)
        # A swept workload is several points of one name; two identical points are a mistake.
        _unique("workload", [w.model_dump_json() for w in self.workloads])
        # Each workload runs on the backends of its kind (S3 or file systems), and on at least one.
        homeless = [w for w in self.workloads if not any(b.supports(w) for b in self.backends)]
        if homeless:
            raise ValueError(
                f"workload {homeless[0].name} runs on none of the backends: "
                + (
                    "it speaks S3; add a backend of type s3"
                    if getattr(homeless[0], "needs_s3", False)
                    else "it needs a file system, and no backend is one (an s3 backend is a bucket, an rbd "
                    "backend a raw image that only fio reads); add a file backend (rbd_snapshot or cephfs on Ceph)"
                )
            )
        refused = [
            reason
            for b in self.backends
            for w in self.workloads
            if b.supports(w) and (reason := b.refuse(w) or faults.refusal(b, w))
        ]
        if refused:
            raise ValueError(refused[0])
        setup_installs(self.workloads)
        readers = sorted({w.name for w in self.workloads if w.uses_dataset})
        if readers and self.dataset is None:
            raise ValueError(
                f"workload(s) {', '.join(readers)} read the data set: add "
                "dataset: {kind: imagenet-like, files: N, seed: S}"
            )
        return self

    @property
    def needs_dl(self) -> bool:
        """The hosts need the deep-learning stack (data set generation, loaders; boto3 for S3 backends)."""
        return (
            self.dataset is not None
            or any(w.tool in ("pytorch", "tensorflow", "calibrate") for w in self.workloads)
            or any(b.type == "s3" for b in self.backends)
        )

    def setup_vars(self) -> dict[str, Any]:
        """What the setup phase installs on the hosts for this campaign (role iolab_host)."""
        tools = {w.tool for w in self.workloads}
        return {
            "iolab_host_dl": self.needs_dl,
            "iolab_host_tf": "tensorflow" in tools,
            "iolab_host_kvcache": bool(tools & {"kvcache", "mlperf_kvcache"}),
            "iolab_host_dlio": "dlio" in tools,
            "iolab_host_mlperf_kvcache": "mlperf_kvcache" in tools,
            "iolab_host_profilers": sorted({p for w in self.workloads for p in w.profilers}),
            **setup_installs(self.workloads),
        }

    @property
    def dataset_formats(self) -> list[str]:
        """Packed copies to make: the campaign's own list and what its workloads read."""
        wanted: set[str] = set(self.dataset.formats) if self.dataset else set()
        for workload in self.workloads:
            wanted |= workload.formats
        return sorted(wanted)


def _unique(kind: str, names: list[str]) -> None:
    doubles = sorted({n for n in names if names.count(n) > 1})
    if doubles:
        raise ValueError(f"{kind} names must be unique; repeated: {', '.join(doubles)}")


FAULT_KINDS = tuple(kinds(faults.AnyFault, "what"))

# What a run's samples say of the page cache it started with (params.cache).
CACHE_STATES = {"drop": "cold", "keep": "kept"}


class Run(Model):
    """One execution: a backend, one point of a workload's sweep, one repetition (on `hosts` hosts)."""

    run_id: str
    campaign: str
    backend: AnyBackend
    workload: AnyWorkload
    repetition: int
    hosts: int | None = None  # a hosts_sweep point: the first N selected hosts
    cache_pass: Literal["cold", "warm"] | None = None  # the two runs of cache: warm

    @property
    def params(self) -> dict[str, Any]:
        params = self.workload.params()
        params["cache"] = self.cache_pass or CACHE_STATES[self.workload.cache]
        for policy in ("warmup", "allow_caching", "profilers"):  # said only when set
            if not params[policy]:
                del params[policy]
        return {**params, "hosts": self.hosts} if self.hosts else params

    @property
    def drop_caches(self) -> bool:
        return self.workload.cache == "drop" or self.cache_pass == "cold"

    @property
    def point(self) -> tuple[str, str, int | None, str | None]:
        """What the repetitions of one measurement share: backend, workload point, host count, cache pass."""
        return (self.backend.name, self.workload.model_dump_json(), self.hosts, self.cache_pass)

    def label(self) -> str:
        return f"{self.workload.name} on {self.backend.name}, rep {self.repetition}" + (
            f", {self.cache_pass}" if self.cache_pass else ""
        )

    def on(self, selected: list[str]) -> list[str]:
        """The hosts this run runs on, of the selected ones."""
        return selected[: self.hosts] if self.hosts else list(selected)


def run_id(
    campaign: str,
    backend: BaseModel,
    workload: BaseModel,
    repetition: int,
    hosts: int | None = None,
    dataset: Dataset | None = None,
    cache_pass: str | None = None,
) -> str:
    """A hash of everything that decides what a run does: the same file always gives the same ids.

    Fields left at their defaults are not hashed, so a new optional field does not
    change the ids of stored runs.
    """
    config = {
        "campaign": campaign,
        "backend": backend.model_dump(exclude_defaults=True),
        "workload": workload.model_dump(exclude_defaults=True),
        "repetition": repetition,
        **({"hosts": hosts} if hosts else {}),
        **({"dataset": dataset.identity()} if dataset else {}),
        **({"cache_pass": cache_pass} if cache_pass else {}),
    }
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]


def expand(campaign: Campaign, selected_hosts: int | None = None) -> list[Run]:
    """Every run of a campaign, in order: backend, workload, sweep point, host count, repetition, cache pass.

    With order: random each backend's runs are shuffled (the cold and warm runs of
    cache: warm stay together, cold first). `selected_hosts` (how many hosts the
    command selected) checks a hosts_sweep against it.
    """
    counts: list[int | None] = [*campaign.hosts_sweep] if campaign.hosts_sweep else [None]
    if selected_hosts is not None and campaign.hosts_sweep and max(campaign.hosts_sweep) > selected_hosts:
        raise UserError(
            f"campaign {campaign.name}: hosts_sweep asks for {max(campaign.hosts_sweep)} hosts but "
            f"only {selected_hosts} are selected; select more with --hosts or lower hosts_sweep"
        )
    shuffle = random.Random(campaign.order_seed).shuffle if campaign.order == "random" else None
    runs = []
    for backend in campaign.backends:
        units = [
            repetition(campaign, backend, workload, rep, count)
            for workload in campaign.workloads
            if backend.supports(workload)
            for count in counts
            for rep in range(1, workload.repetitions_of(campaign.repetitions) + 1)
        ]
        if shuffle:
            shuffle(units)
        runs += [run for unit in units for run in unit]
    return runs


def repetition(
    campaign: Campaign, backend: AnyBackend, workload: AnyWorkload, rep: int, hosts: int | None = None
) -> list[Run]:
    """Repetition `rep` of one workload point on one backend: one run, or its cold and warm runs (cache: warm)."""
    dataset = campaign.dataset if workload.uses_dataset else None
    passes: list[Literal["cold", "warm"] | None] = ["cold", "warm"] if workload.cache == "warm" else [None]
    return [
        Run(
            run_id=run_id(campaign.name, backend, workload, rep, hosts, dataset, cache_pass),
            campaign=campaign.name,
            backend=backend,
            workload=workload,
            repetition=rep,
            hosts=hosts,
            cache_pass=cache_pass,
        )
        for cache_pass in passes
    ]


def _where(loc: tuple, origin: Sequence[int] = ()) -> str:
    """A pydantic error location as the file writes it; `origin`: each sweep point's index in the file."""
    text = ""
    for position, part in enumerate(loc):
        if isinstance(part, int) and position == 1 and loc[0] == "workloads" and part < len(origin):
            text += f"[{origin[part]}]"
        elif isinstance(part, int):
            text += f"[{part}]"
        elif part in BACKEND_TYPES or part in WORKLOAD_TYPES or part in FAULT_KINDS or part.startswith("function-"):
            continue  # the tag of a discriminated union, or a validator's name
        else:
            text += f".{part}" if text else part
    return text or "(top level)"


def _expected_keys(raw: dict[str, Any], loc: tuple) -> str:
    model: type[BaseModel] | None
    if len(loc) == 5 and loc[0] == "workloads" and loc[3] == "accelerator":
        model = Accelerator
    elif len(loc) == 7 and loc[0] == "workloads" and loc[3] == "faults":  # workloads[i].faults[j].<key>
        model = kinds(faults.AnyFault, "what").get(str(loc[5]))
    elif len(loc) == 2 and loc[0] == "dataset":
        model = Dataset
    elif len(loc) == 4 and loc[0] in ("backends", "workloads") and isinstance(loc[1], int):
        registry = BACKEND_TYPES if loc[0] == "backends" else WORKLOAD_TYPES
        model = registry.get(str(loc[2]))
    elif len(loc) == 1:
        model = Campaign
    else:
        model = None
    if model is None:
        return ""
    own = [f for f in model.model_fields if f in model.__annotations__]  # the kind's own keys, then inherited ones
    return f" (expected one of: {', '.join(own + [f for f in model.model_fields if f not in own])})"


def _message(error: Any, raw: dict[str, Any], origin: Sequence[int]) -> str:
    kind, loc = error["type"], error["loc"]
    where = _where(loc, origin)
    if kind == "extra_forbidden":
        return f"{where}: unknown key{_expected_keys(raw, loc)}"
    if kind in ("union_tag_invalid", "union_tag_not_found") and "faults" in loc:  # faults[i]: its `what`
        return (
            f"{where}.what: "
            + (f"unknown fault {error['ctx']['tag']!r}" if kind == "union_tag_invalid" else "missing")
            + f" (expected one of: {', '.join(FAULT_KINDS)})"
        )
    if kind == "union_tag_invalid":
        what = "backend" if loc[0] == "backends" else "workload"
        expected = ", ".join(BACKEND_TYPES if what == "backend" else WORKLOAD_TYPES)
        return f"{where}.type: unknown {what} type {error['ctx']['tag']!r} (expected one of: {expected})"
    if kind == "union_tag_not_found":
        return f"{where}: missing key 'type'"
    if kind == "missing":
        return f"{where}: missing required key"
    if kind == "bool_type":
        return f"{where}: expected true or false, got {error['input']!r}"
    message = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return f"{where}: {message}" if loc else message  # a check across keys names its keys itself


def _no_templates(value: Any, source: str, where: str) -> None:
    """Campaign values reach Ansible as variables: a Jinja expression there would be evaluated."""
    if isinstance(value, dict):
        for key, item in value.items():
            _no_templates(item, source, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_templates(item, source, f"{where}[{index}]")
    elif isinstance(value, str) and any(mark in value for mark in ("{{", "{%", "{#")):
        raise UserError(
            f"{source}: {where}: template markers ({{{{, {{%, {{#) are not allowed in campaign "
            "values; write the value literally"
        )


def _rules_mode(data: dict[str, Any]) -> dict[str, Any]:
    """`mlperf: true` (a workload's, or the campaign's for all of them) as each workload's `mlperf_rules`.

    A pytorch or tensorflow workload's `mlperf: <preset>` (what a type: mlperf entry becomes) is left as it is.
    """
    workloads = data.get("workloads")
    if "mlperf" in data and not isinstance(data["mlperf"], bool):
        raise ValueError(f"mlperf: expected true or false (MLPerf Storage's rules), got {data['mlperf']!r}")
    if not isinstance(workloads, list):
        return data
    everywhere = data.get("mlperf") is True
    out = []
    for index, entry in enumerate(workloads):
        own = entry.get("mlperf") if isinstance(entry, dict) else None
        if own is not None and not isinstance(own, bool | str):
            raise ValueError(f"workloads[{index}].mlperf: expected true or false (MLPerf Storage's rules), got {own!r}")
        if isinstance(entry, dict) and (everywhere or isinstance(entry.get("mlperf"), bool)):
            own = entry.get("mlperf")
            entry = {k: v for k, v in entry.items() if k != "mlperf" or not isinstance(v, bool)}
            entry["mlperf_rules"] = own if isinstance(own, bool) else True
        out.append(entry)
    return {**data, "workloads": out}


def parse(
    raw: Any, source: str, base_dir: Path, max_runs: int = MAX_RUNS, memory: mlperf.HostMemory | None = None
) -> Campaign:
    """Validate a campaign mapping; `source` names the file in errors.

    `memory`: the RAM of each selected host, asked only when `dataset: {files: auto}` or a KV-cache tier needs it.
    """
    if not isinstance(raw, dict):
        raise UserError(
            f"{source}: a campaign file must be a YAML mapping (name:, backends:, workloads:), got {type(raw).__name__}"
        )
    check_size(raw, source, max_runs)  # before a DLIO file is read or a host asked
    try:  # type: mlperf and type: dlio entries become the workloads they stand for; then MLPerf's rules mode
        data = _rules_mode(dict(raw))
        data = presets.expand(data, base_dir, memory)
        data = mlperf.apply_rules(data, memory)
    except ValueError as exc:
        raise UserError(f"{source}: {exc}") from None
    check_size(data, source, max_runs)  # again with the lists a DLIO file sweeps
    _no_templates(data, source, "")
    origin: list[int] = []  # the file's index of each sweep point: errors name the file's workload
    if isinstance(data.get("workloads"), list):
        try:
            _unique("workload", [str(w["name"]) for w in data["workloads"] if isinstance(w, dict) and "name" in w])
        except ValueError as exc:
            raise UserError(f"{source}: workloads: {exc}") from None
        defaults = workload_defaults(data)
        points = []
        for index, workload in enumerate(data["workloads"]):
            made = [workload]
            if isinstance(workload, dict):
                try:
                    made = sweep({**defaults, **workload})
                except ValueError as exc:
                    raise UserError(f"{source}: workloads[{index}].{exc}") from None
            points += made
            origin += [index] * len(made)
        data["workloads"] = points
    root = data.get("mount_root")
    if isinstance(root, str) and isinstance(data.get("backends"), list):  # <mount_root>/<name> where none is set
        data["backends"] = [
            {**b, "mountpoint": f"{root.rstrip('/')}/{b.get('name')}"}
            if isinstance(b, dict)
            and "mountpoint" not in b
            and b.get("type") in BACKEND_TYPES
            and "mountpoint" in BACKEND_TYPES[b["type"]].model_fields
            else b
            for b in data["backends"]
        ]
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as exc:
        problems = [_message(e, data, origin) for e in exc.errors()]
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise UserError(f"{source}: " + "; ".join(problems[:3]) + more) from None
    tiers = kvcache.tier_refusal(campaign.workloads, memory)  # a KV-cache tier larger than a host's memory
    if tiers:
        raise UserError(f"{source}: {tiers}")
    return _resolve_jobfiles(campaign, source, base_dir)


def _resolve_jobfiles(campaign: Campaign, source: str, base_dir: Path) -> Campaign:
    """Check each job file for every backend (devices: those all of them allow); keep the checked text."""
    allowed = set.intersection(*(set(getattr(b, "allow_devices", [])) for b in campaign.backends))
    workloads = []
    for index, workload in enumerate(campaign.workloads):
        if isinstance(workload, FioWorkload) and workload.jobfile:
            path = (base_dir / workload.jobfile).resolve()
            try:
                job = fio_jobfile.load_checked(path, sorted(allowed))
            except ValueError as exc:
                raise UserError(f"{source}: workloads[{index}].jobfile: {exc}") from None
            workload = workload.model_copy(update={"jobfile": str(path), "jobtext": job.text})
            refused = [
                reason
                for backend in campaign.backends
                if backend.supports(workload) and (reason := backend.refuse(workload) or workload.room_refusal(backend))
            ]
            if refused:  # a job file that writes, on a read-only backend, or lays out more than it holds
                raise UserError(f"{source}: {refused[0]}")
        workloads.append(workload)
    return campaign.model_copy(update={"workloads": workloads})


def check_commands(campaign: Campaign, source: str | Path, allowed: bool) -> None:
    """A campaign file is often someone else's: what it would run or install on every host (a warm_command, a DLIO
    requirement: Workload.commands) runs only when the operator says so on the command line."""
    for workload in campaign.workloads:
        for command in [] if allowed else workload.commands():
            raise UserError(
                f"{source}: workload {workload.name}: {command}; pass --allow-commands if you trust this campaign file"
            )


def load(
    path: str | Path,
    max_runs: int = MAX_RUNS,
    workload_file: str | Path | None = None,
    memory: mlperf.HostMemory | None = None,
) -> Campaign:
    """Read and validate a campaign file (bounded: iolab.yamlfile); every error names the file and the key.

    `workload_file`: a DLIO workload file whose one workload (and data set) replaces the campaign's.
    """
    path = Path(path)
    raw = yamlfile.load(path, "campaign file", "--campaign")
    if workload_file is not None:
        if not isinstance(raw, dict):
            raise UserError(f"{path}: a campaign file must be a YAML mapping")
        try:
            raw = presets.campaign_for(workload_file, raw)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    return parse(raw, str(path), path.parent, max_runs, memory)
