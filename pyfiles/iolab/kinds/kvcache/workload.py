"""Workload kind `kvcache`: MLPerf Storage v3.0's KV-cache offload, by iolab or by MLCommons' kv-cache.py.

    {name: kv, type: kvcache, model: llama3.1-8b, users: 8, clients: 2, duration: 60s, context_scale: 0.0625}
    {name: kv, type: kvcache, option: 2}                                   # the rules' CLOSED option 2
    {name: kv, type: kvcache, users: 32, search: users, latency_bound: 200ms}   # the most users under the bound
    {name: ref, type: kvcache, engine: mlperf-kvcache, kvcache_source: /srv/mirror/storage/kv_cache_benchmark}

Each host runs `clients` ranks of `users` users each (iolab.kinds.kvcache.host, or kv-cache.py under mpirun:
iolab.kinds.kvcache.host_reference); what they do is iolab.host.kvcache_sim's docstring. A key left out takes
the CLOSED option's value when `option` names one (workloads.kvcache_rules.OPTIONS), else the default
here. `trials` is the point's repetitions (each trial a run: caches dropped before it, every one
stored). `search: users` (or `clients`) finds the most users per client (clients per host), up to
this workload's, whose max-of-P95 device read latency holds under `latency_bound` in every probe
(iolab.run.kvcache_search).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from iolab.progress import search_probes
from iolab.schema import Duration
from iolab.shared.kvcache_model import MODELS, bytes_per_token, entry_bounds
from iolab.units import human, parse_size
from iolab.workloads.base import At, HostCall, Workload, mpi_key, mpi_program, mpi_tool, pip_installs
from iolab.workloads.kvcache_rules import OPTIONS

# The search's default bound on the max-of-P95 device read latency: kv-cache.py's own pass mark for the storage
# tier's device read P95 (its latency profile, "Storage Tier Read Device P95 < 200ms"; docs/REFERENCE_FIGURES.md).
LATENCY_BOUND = 0.200  # s
# No host reads a file faster than this (B/s): a bound under the smallest entry's read at it can never hold.
FASTEST_READ = 100e9
# Beyond the run itself: the ranks' start (each makes its data pool), their end, the summary.
START_S = 120.0
SEEDS = 2**32  # a seed is below this: NumPy's legacy seeding (kv-cache.py's np.random.seed) takes no other
GIT_PINNED = re.compile(r"git\+\S+@[0-9a-f]{40}(#\S*)?")


def _bytes(value: Any) -> int:
    """A tier's size: 0 (no tier) or a size with units."""
    return 0 if value in (0, "0") else parse_size(value)


TOOL = "iolab.kinds.kvcache.host"  # what its host call runs on each host (python -m)
REFERENCE_TOOL = "iolab.kinds.kvcache.host_reference"  # engine mlperf-kvcache's: MLCommons' kv-cache.py under mpirun


class KvcacheWorkload(Workload):
    """MLPerf Storage v3.0's KV-cache offload workload (`engine: iolab`, or MLCommons' kv-cache.py)."""

    type: Literal["kvcache"]
    option: Literal[1, 2, 3] | None = None  # a CLOSED option of the rules: its values for the keys left out
    model: Literal["llama3.1-8b", "llama3.1-70b", "custom"] | None = None
    layers: Annotated[int, Field(ge=1, le=1024, strict=True)] | None = None
    kv_heads: Annotated[int, Field(ge=1, le=1024, strict=True)] | None = None
    head_dim: Annotated[int, Field(ge=1, le=4096, strict=True)] | None = None
    users: Annotated[int, Field(ge=1, le=100_000, strict=True)] | None = None  # per client
    clients: Annotated[int, Field(ge=1, le=1024, strict=True)] = 1  # ranks per host
    duration: Duration | None = None
    seed: Annotated[int, Field(strict=True)] = 42
    concurrent_allocs: Annotated[int, Field(ge=0, le=100_000, strict=True)] | None = None
    gpu_bytes: Annotated[int, Field(ge=0)] | None = None
    cpu_bytes: Annotated[int, Field(ge=0)] | None = None
    context_scale: Annotated[float, Field(gt=0, le=1)] = 1.0
    generation: Literal["none", "fast", "realistic"] = "none"
    trials: Annotated[int, Field(ge=1, le=100, strict=True)] | None = None
    pause: Duration | None = None  # idle before a point's first trial (the rules' 90 s between options)
    search: Literal["users", "clients"] | None = None
    latency_bound: Duration | None = None
    engine: Literal["iolab", "mlperf-kvcache"] = "iolab"
    kvcache_source: str | None = None

    writes: ClassVar[str] = "KV-cache entries"

    @model_validator(mode="before")
    @classmethod
    def _sizes(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {**data, **{k: _bytes(data[k]) for k in ("gpu_bytes", "cpu_bytes") if data.get(k) is not None}}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> KvcacheWorkload:
        shape = [k for k in ("layers", "kv_heads", "head_dim") if getattr(self, k) is not None]
        if self.model == "custom" and len(shape) < 3:
            raise ValueError(
                "model custom needs its shape: layers, kv_heads and head_dim (Llama-3.1-8B's are 32, 8 and 128)"
            )
        if shape and self.model != "custom":
            raise ValueError(f"{', '.join(shape)}: a shape of its own is model: custom; a preset has its own shape")
        if not 0 <= self.seed < SEEDS:
            raise ValueError(
                f"seed {self.seed}: give a whole number from 0 to {SEEDS - 1} (NumPy's seeds; kv-cache.py's too)"
            )
        if self.duration is not None and self.duration <= 0:
            raise ValueError("duration: give how long each trial runs, e.g. 60s")
        if self.latency_bound is not None and not self.search:
            raise ValueError("latency_bound is the search's: give search: users (or clients), or drop it")
        if self.engine == "mlperf-kvcache":
            self._reference_consistent()
        elif self.kvcache_source:
            raise ValueError("kvcache_source is what engine mlperf-kvcache installs: set that engine or drop it")
        bound = self.bound
        fewest, _ = entry_bounds(self.per_token, self.context_scale)
        if self.search and bound < fewest / FASTEST_READ:
            raise ValueError(
                f"latency_bound {bound:g} s can never hold: the smallest entry this workload reads "
                f"({human(fewest, 'B')}) takes {fewest / FASTEST_READ:.3g} s at {FASTEST_READ / 1e9:g} GB/s, faster "
                f"than any host copies memory; raise it (kv-cache.py's own mark is {LATENCY_BOUND:g} s)"
            )
        return self

    def _reference_consistent(self) -> None:
        source = self.kvcache_source
        if not source:
            raise ValueError(
                "engine mlperf-kvcache runs MLCommons' kv-cache.py, which iolab does not ship: give kvcache_source, "
                "mlcommons/storage's kv_cache_benchmark as git+URL@COMMIT#subdirectory=kv_cache_benchmark, or "
                "a folder or wheel on the hosts"
            )
        if source.startswith("git+") and not GIT_PINNED.fullmatch(source):
            raise ValueError(f"kvcache_source {source!r}: pin the git source to a commit (git+URL@<40 hex digits>)")
        if not source.startswith(("git+", "/")):
            raise ValueError(f"kvcache_source {source!r}: give git+URL@COMMIT, or an absolute path on the hosts")
        if self.search:
            raise ValueError("search probes with iolab's own engine: drop search, or engine mlperf-kvcache")
        if self.settled("duration") != round(self.settled("duration")):
            raise ValueError("duration: kv-cache.py runs whole seconds; give e.g. 60s")

    # --- the values a run uses: the file's, else the option's, else the defaults -----------------------

    def settled(self, key: str) -> Any:
        """A setting as the run uses it: the file's value, else the CLOSED option's, else the default."""
        value = getattr(self, key)
        if value is not None:
            return value
        if self.option is not None:
            return OPTIONS[self.option][key]
        return DEFAULTS[key]

    @property
    def shape(self) -> tuple[int, int, int]:
        model = self.settled("model")
        if model == "custom":
            assert self.layers and self.kv_heads and self.head_dim  # _consistent
            return self.layers, self.kv_heads, self.head_dim
        return MODELS[model]

    @property
    def per_token(self) -> int:
        return bytes_per_token(*self.shape)

    @property
    def bound(self) -> float:
        return self.latency_bound if self.latency_bound is not None else LATENCY_BOUND

    @property
    def tool(self) -> str:
        """kvcache (roles/bench_kvcache, iolab's), or mlperf_kvcache (roles/bench_mlperf_kvcache, kv-cache.py)."""
        return "mlperf_kvcache" if self.engine == "mlperf-kvcache" else "kvcache"

    def estimate(self) -> float | None:
        """A trial's duration and the ranks' start and end (measured: about 10 s); a search: as many of those as it
        is expected to probe (iolab.progress.search_probes up to its ceiling)."""
        trial = self.settled("duration") + 10.0
        return trial * search_probes(self.ceiling()) if self.search else trial

    def ceiling(self) -> int:
        """The most a search probes: its users per client, or its clients per host."""
        return self.settled("users") if self.search == "users" else self.clients

    def commands(self) -> list[str]:
        """kvcache_source is the campaign file's choice of code, installed on every host (--allow-commands)."""
        installs = "engine mlperf-kvcache installs kv-cache.py from"
        return super().commands() + pip_installs(installs, self.kvcache_source, "its build runs there")

    def repetitions_of(self, campaign: int) -> int:
        """Runs of one point: a search's one, else its trials (the campaign's repetitions when not given)."""
        return 1 if self.search else self.trials or campaign

    def host_options(self) -> dict[str, Any]:
        """What each rank simulates (iolab.host.kvcache_tiers.Settings' fields)."""
        model = self.settled("model")
        return {
            "model": None if model == "custom" else model,
            "layers": self.shape[0],
            "kv_heads": self.shape[1],
            "head_dim": self.shape[2],
            "users": self.settled("users"),
            "duration": self.settled("duration"),
            "seed": self.seed,
            "allocs": self.settled("concurrent_allocs"),
            "gpu_bytes": self.settled("gpu_bytes"),
            "cpu_bytes": self.settled("cpu_bytes"),
            "context_scale": self.context_scale,
            "generation": self.generation,
        }

    def params(self) -> dict[str, Any]:
        """What the samples carry: every setting as the run used it."""
        params = super().params()
        params.update({k: self.settled(k) for k in DEFAULTS})
        params["per_token_bytes"] = self.per_token
        return params

    def role_vars(self, target: str) -> dict[str, Any]:
        timeout = self.run_timeout(self.settled("duration") + START_S + (self.pause or 0.0))
        tool = self.tool
        return {
            f"bench_{tool}_target": target,
            f"bench_{tool}_options": self.host_options(),
            f"bench_{tool}_clients": self.clients,
            f"bench_{tool}_option": self.option or 0,
            f"bench_{tool}_pause": self.pause or 0.0,
            f"bench_{tool}_timeout": timeout,
        }

    def repetition_vars(self, repetition: int) -> dict[str, Any]:
        """The pause only before a point's first trial."""
        return {f"bench_{self.tool}_pause": (self.pause or 0.0) if repetition == 1 else 0.0}

    def describe(self) -> str:
        model = self.settled("model")
        tiers = ", ".join(
            f"{tier} tier {human(self.settled(f'{tier}_bytes'), 'B')}"
            for tier in ("gpu", "cpu")
            if self.settled(f"{tier}_bytes")
        )
        who = "MLCommons' kv-cache.py under mpirun" if self.engine == "mlperf-kvcache" else "iolab's KV-cache clients"
        users, clients = f"{self.settled('users')} user(s) per client", f"{self.clients} client(s) per host"
        if self.search == "users":
            users = f"the most users per client, up to {self.settled('users')},"
        elif self.search == "clients":
            clients = f"the most clients per host, up to {self.clients},"
        what = f"{clients}, {users}"
        if self.search:
            what += f" whose max-of-P95 read latency holds ≤ {self.bound * 1000:g} ms in every probe"
        return (
            f"{who}: {what}; {model} ({human(self.per_token, 'B')} of KV per token"
            + (f", contexts × {self.context_scale:g}" if self.context_scale != 1 else "")
            + f"), {self.settled('duration'):g} s per trial"
            + (f", {tiers}" if tiers else ", storage tier only")
            + (f"; CLOSED option {self.option}" if self.option else "")
            + ("; MLPerf Storage's rules checked" if self.mlperf_rules else "")
        )

    @property
    def host_program(self) -> str:
        return mpi_program(REFERENCE_TOOL) if self.engine == "mlperf-kvcache" else f"python -m {TOOL}"


# What the kvcache role takes from the controller, by the name host_call gives it (bench_kvcache_<name>), and what
# the mlperf_kvcache role takes (bench_mlperf_kvcache_<name>): the same, and how its mpirun reaches the other hosts.
KVCACHE_VARS = ("target", "options", "clients", "option", "pause", "timeout")
MLPERF_KVCACHE_VARS = (*KVCACHE_VARS, "ssh", "ssh_key", "appear")


def host_call(
    at: At,
    *,
    target: str,
    options: dict[str, Any],
    clients: int = 1,
    option: int = 0,
    pause: float = 0.0,
    timeout: float,
) -> HostCall:
    """A KV-cache run's call on `host` (iolab.kinds.hostcall): its ranks work in <target>/iolab-<host>/kvcache;
    the prepare (iolab.kinds.kvcache.host prepare) checks the target's room and the host's memory, idles `pause` s (the
    rules' pause between options), makes the run directory and drops the caches (`drop`); then the clients."""
    work = ["--dir", f"{target}/iolab-{at.host}/kvcache", "--clients", str(clients), "--options", json.dumps(options)]
    prepare = at.module(TOOL, "prepare", "--host", at.host, "--run-dir", at.run_dir, *work)
    prepare += ["--pause", str(pause), *(["--drop-caches"] if at.drop else [])]
    run = at.hostrun("--target", target, "--timeout", str(timeout), "--telemetry-after", "0")
    tool = at.module(TOOL, "run", "--out", at.run_dir, "--option", str(option), *work)
    return HostCall(prepare, run, tool, {}, KVCACHE_PREPARE_TASK, "Run the clients")


def reference_call(
    at: At, *, ssh: list[str] | tuple[str, ...] = (), ssh_key: str = "", appear: float = 120.0, **kv: Any
) -> HostCall:
    """An engine mlperf-kvcache run's call on `host` (`kv`: host_call's): MLCommons' kv-cache.py as one MPI job over
    the play's hosts (iolab.kinds.kvcache.host_reference), `clients` ranks on each. Its prepare is host_call's options
    given to the reference's own prepare, which checks too that kv-cache.py is installed (the campaign's setup phase
    installs it) and, on the first host, mpirun's ssh key; the first host runs mpirun, the others wait while their
    ranks run."""
    own, key = host_call(at, **kv), mpi_key(at, ssh_key)
    tool = mpi_tool(
        at,
        REFERENCE_TOOL,
        ranks=kv.get("clients", 1),
        appear=appear,
        ssh=ssh,
        ssh_key=ssh_key,
        both=("--option", str(kv.get("option", 0))),
        launch=("--options", json.dumps(kv["options"])),
        part=lambda host: {"work": f"{kv['target']}/iolab-{host}/kvcache"},
    )
    own_prepare = own.prepare[own.prepare.index("prepare") + 1 :]  # its options, for the reference's prepare
    prepare = at.module(REFERENCE_TOOL, "prepare", *own_prepare, *(["--key", key] if key else []))
    return dataclasses.replace(own, prepare=prepare, tool=tool, run_task="Run kv-cache.py (mpirun on the first host)")


KVCACHE_PREPARE_TASK = "Check the room and the memory, make the run directory and drop the caches"  # the role's task

# The values of the keys an option fixes, where neither the file nor an option gives one: kv-cache.py's defaults,
# but for the tiers (0: everything reaches the storage, as every CLOSED option's GPU tier) and the generation.
DEFAULTS: dict[str, Any] = {
    "model": "llama3.1-8b",
    "users": 100,
    "duration": 60.0,
    "gpu_bytes": 0,
    "cpu_bytes": 0,
    "concurrent_allocs": 0,
}


def tier_refusal(workloads: list[Any], memory: Callable[[], list[int | None]] | None) -> str | None:
    """Why a kvcache workload's memory tiers cannot fit the selected hosts (`memory()`: each one's RAM, read only
    when a workload has tiers; a dry run's zeros, or no reader, leave it to the hosts' own check), or None."""
    tiered = [
        (w, w.clients * (w.settled("gpu_bytes") + w.settled("cpu_bytes")))
        for w in workloads
        if isinstance(w, KvcacheWorkload)
    ]
    tiered = [(w, need) for w, need in tiered if need]
    if not tiered or memory is None:
        return None
    ram = [m for m in memory() if m]
    if not ram or len(ram) < len(memory()):
        return None
    workload, need = max(tiered, key=lambda pair: pair[1])
    if need <= min(ram):
        return None
    return (
        f"workloads: {workload.name}: its GPU and CPU tiers take {human(need, 'B')} on each host "
        f"({workload.clients} client(s)), more than the {human(min(ram), 'B')} of memory of the smallest selected "
        "host; lower gpu_bytes, cpu_bytes or clients"
    )
