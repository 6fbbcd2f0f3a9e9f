"""What every workload kind has: a name, the page cache it starts with, a time limit, profilers."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from iolab import faults as faulting
from iolab.schema import Bool, Duration, Model, Name
from iolab.units import human

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
    warmup: Bool = False  # one unrecorded run before a point's first measured one, per mount
    allow_caching: Bool = False  # potential_caching becomes `overridden`: kept, but the sample stays valid
    timeout: Duration | None = None  # per run: the tool is stopped and the run recorded as failed after it
    # A host of a run on several that started further than this from the common start is flagged (start_skewed;
    # None: START_SKEW_MAX). Its clock agrees with the controller's within a second (iolab.drive.lease checks it).
    start_skew_max: Duration | None = None
    # MLPerf Storage v3.0's rules mode (`mlperf: true` in the campaign file, iolab.workloads.mlperf.apply_rules):
    # the run does what the rules ask and its samples are checked against them (iolab.measures.validity).
    mlperf_rules: Bool = False
    # Sampling profilers while the tool runs, kept under raw/: perf (system-wide, with call
    # graphs: the kernel's storage stack too) and py-spy (the Python tool and its workers).
    profilers: list[Literal["perf", "py-spy"]] = []
    # Faults injected into the storage while each run measures it, on the clock of the run's common start
    # (campaign.faults: the kinds; drive.injector applies them; parsers.faults says what the clients felt).
    faults: faulting.Faults = []

    if TYPE_CHECKING:  # every kind declares it, with its own literal
        type: str

    @model_validator(mode="after")
    def _consistent_policies(self) -> Workload:
        if self.warm_command and self.cache != "warm":
            raise ValueError("warm_command is the warm-up of cache: warm; set cache: warm or drop warm_command")
        if "py-spy" in self.profilers and self.tool == "fio":
            raise ValueError("py-spy samples Python programs; fio is not one: use profilers: [perf]")
        if refused := faulting.problem(self):
            raise ValueError(refused)
        return self

    def repetitions_of(self, campaign: int) -> int:
        """The runs of one of its points: a search's one, else the campaign's repetitions (each kind may say)."""
        return 1 if getattr(self, "search", None) else campaign

    def run_timeout(self, default: float) -> float:
        return self.timeout or default

    # What a kind says of itself where it differs from these: a class variable where it is one value, a property
    # where its fields decide. The campaign asks uses_dataset and formats; a backend asks tool, needs_s3, writes and
    # too_big (iolab.backends.base.Workload: Backend.supports, refuse, run_vars).
    @property
    def tool(self) -> str:
        """Names its bench role (roles/bench_<tool>) and its parser: its type, unless its fields pick (an engine)."""
        return self.type

    @property
    def uses_dataset(self) -> bool:
        """Whether its runs read the campaign's data set (a dataset phase makes it before them)."""
        return False

    @property
    def host_program(self) -> str:
        """What its host call runs on each host, as --dry-run says it: `python -m` its kind's TOOL (the module its
        host_call runs), or how an engine's MPI job runs its own."""
        return "its kind's host call (iolab.kinds.hostcall)"

    @property
    def formats(self) -> set[str]:
        """The packed copies of the data set it reads (Campaign.dataset_formats has them made)."""
        return set()

    @property
    def needs_s3(self) -> bool:
        """Whether it runs on s3 backends (objects, reader s3) rather than on file systems."""
        return False

    @property
    def writes(self) -> str:
        """What it writes on its target, '' when it only reads: a read-only backend refuses a workload that writes."""
        return ""

    def too_big(self, where: str, size: int) -> str | None:
        """Why what one host's run holds at once on the target does not fit `size` bytes of `where` (a tmpfs holds
        all of it), or None: only the kinds that write or stage files of their own say so."""
        return None

    def commands(self) -> list[str]:
        """What the workload would run or install on every host that the campaign file, not iolab, chose: each a
        sentence; `bench.all` runs them only with --allow-commands (campaign.check_commands), the dry run says them."""
        warm = [f"warm_command runs {' '.join(self.warm_command)!r} on every host"] if self.warm_command else []
        return warm + faulting.commands(self)

    def params(self) -> dict[str, Any]:
        """The fields a run's samples carry as parameters (measures.validity tells settings from run sizes by name)."""
        return self.model_dump(exclude={"name", "type", "warm_command"}, exclude_none=True)

    def dataset_vars(self, root: str) -> dict[str, Any]:
        """Where a kind that reads the data set finds it, as its role's variables; nothing for the others."""
        return {}

    def describe(self) -> str:
        """What the kind runs on each host, in a line (--dry-run); each kind says more."""
        return self.tool

    def admissible(self, dataset_files: int | None, hosts: int) -> None:
        """Refuse (UserError, one line) what this workload's runs could not measure on `hosts` hosts, before
        anything runs; nothing by default."""
        return None

    def estimate(self) -> float | None:
        """Seconds its tool runs, where the workload says (fio's runtime and ramp); None where the data set's size
        and the storage decide (a loader's epochs)."""
        return None

    def dry_run(self, variables: dict[str, Any]) -> list[str]:
        """--dry-run's lines on what each host runs: the kind's line, and what its role builds the command from."""
        return [
            f"on each host: {self.describe()}; role {variables['run_role']} builds the command "
            f"({self.host_program}, under iolab.host.hostrun) from:",
            *[f"  {key}: {json.dumps(value)}" for key, value in variables.items() if key != "run_role"],
        ]

    def repetition_vars(self, repetition: int) -> dict[str, Any]:
        """Role variables that change with the repetition (a loader's shuffle seed under MLPerf's rules)."""
        return {}


def does_not_fit(workload: str, held: str, room: int, where: str, size: int, fix: str) -> str | None:
    """Workload.too_big's line where a host's `room` bytes (`held`: what they are) do not fit `size` bytes of `where`,
    `fix` after it; None where they fit."""
    if room <= size:
        return None
    return f"workload {workload}: its {held} does not fit {where} ({human(size, 'B')}){fix}"


def pip_installs(installs: str, source: str | None, runs: str) -> list[str]:
    """Workload.commands' sentence for what pip installs, as root, on every host from the campaign file's `source`
    (`installs`: what installs what from it; `runs`: what of it runs there), or none where the file names none."""
    return [f"{installs} {source!r} with pip, as root, on every host ({runs})"] if source else []


def setup_installs(workloads: list[Any]) -> dict[str, str]:
    """What the setup phase installs from workloads' fields, once a command (roles/iolab_host's dlio.yml and
    mlperf_kvcache.yml): iolab_host_dlio_requirement (the role's pin where none), iolab_host_mlperf_kvcache_source;
    ValueError where the workloads of one tool give two (the hosts hold one at a time)."""
    out: dict[str, str] = {}
    for field, tool in (("dlio_requirement", "dlio"), ("kvcache_source", "mlperf_kvcache")):
        given = {getattr(w, field) or "" for w in workloads if w.tool == tool}
        if len(given) > 1:
            raise ValueError(
                f"the workloads of tool {tool} give different {field}s: the hosts hold one at a time, installed "
                "once a command; give them one, or run them in two campaigns"
            )
        out |= {f"iolab_host_{tool}_{field.split('_')[-1]}": source for source in given if source}
    return out


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


@dataclasses.dataclass(frozen=True)
class Play:
    """The hosts of one run, as a kind's host call needs them: in the play's order (a distributed job's node
    ranks), the run's id, and how the hosts reach each other (a distributed job's rendezvous, an MPI job's
    application contexts): each one's address, its run directory where the job's first host must name it, the
    key Ansible reaches the first host with and whether the hosts are simulated ones (iolab_host_shared_root)."""

    hosts: list[str]
    run_id: str = "0"
    addresses: list[str] = dataclasses.field(default_factory=list)  # 127.0.0.1 for ansible_connection: local
    dirs: list[str] = dataclasses.field(default_factory=list)
    ssh_key: str = ""
    simulated: bool = False

    @classmethod
    def of(
        cls, hosts: list[str], run_id: str, hostvars: Mapping[str, Mapping[str, Any]], dirs: Mapping[str, str]
    ) -> Play:
        """The play of `hosts`, their inventory variables (`hostvars`, by host) saying how each is reached; `dirs`,
        each host's run directory."""
        seen = [hostvars.get(h) or {} for h in hosts]
        addresses = [
            "127.0.0.1" if v.get("ansible_connection", "ssh") == "local" else str(v.get("ansible_host", h))
            for h, v in zip(hosts, seen, strict=True)
        ]
        first = seen[0] if seen else {}
        key, simulated = str(first.get("ansible_ssh_private_key_file", "")), first.get("iolab_host_shared_root", False)
        return cls(list(hosts), run_id, addresses, [str(dirs.get(h, "")) for h in hosts], key, _true(simulated))


def _true(value: Any) -> bool:
    """An inventory's boolean as Ansible reads one (`true`, "yes", "1", ...): YAML's own as it is, another value
    through Ansible's own reading (imported only then: ≈ 50 ms)."""
    if isinstance(value, bool):
        return value
    from ansible.module_utils.parsing.convert_bool import boolean

    return boolean(value, strict=False)


# Characters of a text (a user's job file, a trace) that travel in a host call's argv: a remote command is one argument
# of the host's shell (`sh -c`), which Linux caps at 128 KiB (MAX_ARG_STRLEN); a longer one is copied by the bench role.
INLINE_TEXT = 64 << 10


@dataclasses.dataclass(frozen=True)
class At:
    """Where a kind's host call runs: the host's python, the host, the run's directory there, the run's play, and
    whether the caches are dropped before the run (its cache policy)."""

    python: str
    host: str
    run_dir: str
    play: Play
    drop: bool

    def module(self, name: str, *args: str) -> list[str]:
        """`python -m NAME ARGS` on the host."""
        return [self.python, "-m", name, *args]

    def hostrun(self, *options: str) -> list[str]:
        """iolab.host.hostrun run in the run's directory, with `options` (before its start option)."""
        return self.module("iolab.host.hostrun", "run", "--dir", self.run_dir, *options)


@dataclasses.dataclass(frozen=True)
class HostCall:
    """One host's run of any kind, from one place per kind (iolab.kinds.hostcall): its `prepare` (checks, the run
    directory, the cache drop), `run` (iolab.host.hostrun run's options before the start option), the `tool` (after
    --), more environment for the tool, and the names of the two steps (its bench role's task names) a failure
    is recorded under; `storage_side`: whether a run that drops its caches drops the storage side's too (a
    calibration reads no storage); `first`: a call every host makes before this one, all of them or none (a
    checkpoint's write, before its read). Both routes run it: the fan-out's one call (hostrun run --before PREPARE)
    and the bench role's tasks (through a filter plugin), so that no argv is built twice."""

    prepare: list[str]
    run: list[str]
    tool: list[str]
    env: dict[str, str]
    prepare_task: str
    run_task: str
    storage_side: bool = True
    first: HostCall | None = None


def loader_call(kind: str, at: At, *, target: str, dataset: str, timeout: float) -> tuple[str, list[str], list[str]]:
    """What every loader kind's host call has: the data set's directory (the one every host reads, `dataset`, or the
    host's own copy, <target>/iolab-<host>/dataset), its prepare (iolab.host.prepare loader: the checks, the run
    directory, the cache drop; each kind adds its packs) and hostrun run's options (in the data set's directory,
    telemetry from the tool's start)."""
    root = dataset or f"{target}/iolab-{at.host}/dataset"
    prepare = at.module("iolab.host.prepare", "loader", "--kind", kind, "--host", at.host, "--dir", at.run_dir)
    prepare += ["--root", root, *(["--drop-caches"] if at.drop else [])]
    run = at.hostrun("--target", target, "--timeout", str(timeout), "--cwd", root, "--telemetry-after", "0")
    return root, prepare, run


LOADER_PREPARE_TASK = "Check the data set, make the run directory and drop the caches"  # the loader roles' task

# The ssh that mpirun, on an MPI job's first host, starts its daemons on the other hosts with (plm_rsh_agent): a host
# key seen first is accepted and kept; simulated hosts, whose inventory keeps no host keys, are reached as Ansible
# reaches them (none kept, none checked). A kind's `ssh` variable replaces it.
MPI_SSH = ["ssh", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"]


def mpi_key(at: At, ssh_key: str) -> str:
    """The key the first host of an MPI job over several must hold for mpirun's ssh (`ssh_key`, or the one Ansible
    reaches that host with), which its prepare checks; '' on the other hosts and for a job on one."""
    if at.host != at.play.hosts[0] or len(at.play.hosts) < 2:
        return ""
    return ssh_key or at.play.ssh_key


def mpi_program(module: str) -> str:
    """--dry-run's words for an MPI job's tool (mpi_tool's): what the first host runs and what the others do."""
    return f"python -m {module}: the first host's runs mpirun over every host, the others' wait for their ranks"


def mpi_tool(
    at: At,
    module: str,
    *,
    ranks: int,
    appear: float,
    ssh: list[str] | tuple[str, ...] = (),
    ssh_key: str = "",
    both: tuple[str, ...] = (),
    launch: tuple[str, ...] = (),
    part: Callable[[str], dict[str, Any]] | None = None,
) -> list[str]:
    """An MPI job's tool on `at.host` (`python -m MODULE`): the first host of the play runs mpirun over every host
    (`launch --hosts`: one application context per host, {addr, ranks, dir} and `part(host)` each; `--rsh`, the
    ssh mpirun reaches the others with), every other host waits while its `ranks` run (`wait`, failing when none
    started within `appear` s); `both` go to either, `launch` to the first only."""
    play = at.play
    if at.host != play.hosts[0]:
        wait = ["wait", "--dir", at.run_dir, "--ranks", str(ranks), "--appear", f"{appear:g}"]
        return at.module(module, *wait, *both)
    parts = [
        {"addr": addr, "ranks": ranks, "dir": run_dir, **(part(host) if part else {})}
        for host, addr, run_dir in zip(play.hosts, play.addresses, play.dirs, strict=True)
    ]
    rsh = list(ssh) or [*MPI_SSH, *(_SIMULATED_SSH if play.simulated else ["-o", "StrictHostKeyChecking=accept-new"])]
    key = ssh_key or play.ssh_key
    rsh += ["-i", key] if key else []
    return at.module(module, "launch", "--hosts", json.dumps(parts), "--rsh", json.dumps(rsh), *both, *launch)


_SIMULATED_SSH = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
