"""Run a campaign: for each backend mount, for each run drop caches → tool → collect, always unmount.

The controller plans and records; Ansible (through `iolab.runner`) does the
work on the hosts. What a run measured on each host becomes samples in the
campaign's store as soon as the run ends, so an interruption loses nothing
already gathered, and a later call runs only what is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import io
import itertools
import json
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from rich.console import Console

from iolab import datasets, release, runner, validity
from iolab.campaign import Campaign, Run, expand, repetition
from iolab.errors import RunFailed, UserError
from iolab.host import ceph_osds, fio_jobs
from iolab.hosts import Inventory
from iolab.parsers import Parsed, ParseError
from iolab.progress import Planned, Progress
from iolab.samples import AGGREGATE_HOST, DISK_ERRORS, ResultStore, Sample, StoreError, utc_iso
from iolab.units import human
from iolab.workloads import parser_for
from iolab.workloads.base import DATASET_DIR

HOST_DIR = "/opt/iolab"
HOST_PYTHON = f"{HOST_DIR}/venv/bin/python"  # made by the iolab_host role
# Metrics that add up across hosts into the aggregate (host "*").
ADDITIVE = (
    "read_bw",
    "write_bw",
    "read_iops",
    "write_iops",
    "samples_per_s",
    "stat_per_s",
    "open_per_s",
    "readdir_per_s",
)
HEADLINE = (
    "accelerators_fed",
    "samples_per_s",
    "read_bw",
    "write_bw",
    "read_iops",
    "stat_per_s",
    "checkpoint_write_bw",
)
# What this command leaves on a host lies under HOST_DIR/runs/OWNER/<host>/: the controller, this process
# and its start, so two campaigns (two labs' hosts of one name on one file system) never share a directory
# and teardown removes only its own. The host lease records it for a takeover after a crash (iolab.lease).
OWNER = f"{socket.gethostname()}-{os.getpid()}-{time.time_ns() // 1_000_000}"
# What teardowns of this command left on a host, one line each (iolab.cli says teardown is done only
# when a teardown added none).
teardown_left: list[str] = []


@dataclasses.dataclass
class Lab:
    """The hosts a command works on, and how to reach them through Ansible."""

    inventory: Inventory
    hosts: list[str]
    console: Console
    status: Callable[[], str] | None = None  # a campaign's progress, shown under the live table

    def extravars(self) -> dict[str, Any]:
        # One release for the whole command: every phase runs the code the hosts were set up with.
        if not hasattr(self, "_release"):
            self._release = release.build()
        digest, archive = self._release
        return {
            "iolab_host_dir": HOST_DIR,
            "iolab_python": HOST_PYTHON,
            "iolab_owner": OWNER,
            "iolab_release": digest,
            "iolab_release_archive": str(archive),
        }

    def play(
        self,
        phases: runner.Phase | list[runner.Phase],
        title: str,
        hosts: list[str] | None = None,
        cancellable: bool = True,
    ) -> runner.Result:
        return runner.run(
            phases,
            self.inventory.path,
            hosts or self.hosts,
            self.extravars(),
            title=title,
            console=self.console,
            cancellable=cancellable,
            status=self.status,
        )


# --- phases: what the controller asks of the playbooks ---------------------------------------


def storage_phase(campaign: Campaign, backend_name: str, state: str, stop_tools: bool = False) -> runner.Phase:
    """The storage phase for one backend; `state` is its role's: mounted, kept, unmounted or absent."""
    backend = next(b for b in campaign.backends if b.name == backend_name)
    return runner.Phase(
        "storage.yml",
        {
            "storage_role": backend.role,
            "storage_stop_tools": stop_tools,
            "storage_target": backend.target,
            "storage_mount_root": campaign.mount_root,
            "storage_existing": not hasattr(backend, "mountpoint"),
            **backend.role_vars(state, campaign.dataset, campaign.dataset_formats),
        },
    )


def workload_vars(run: Run) -> dict[str, Any]:
    """The bench role of the run's tool, and the role's variables (as the backend needs them)."""
    variables = {**run.workload.role_vars(run.backend.target), **run.workload.repetition_vars(run.repetition)}
    if run.workload.uses_dataset:  # each host's own copy, or the one a read-only backend holds
        variables.update(run.workload.dataset_vars(datasets.shared_root(run.backend)))
    return {"run_role": f"bench_{run.workload.tool}", **run.backend.run_vars(run.workload, variables)}


def run_phase(run: Run, warm_command: bool = False) -> runner.Phase:
    """Run `run` on the hosts (caches dropped as its cache policy says); each host returns its files packed.

    `warm_command`: run the workload's warm_command on each host first (the warm run of cache: warm).
    """
    warm = {"run_warm_command": run.workload.warm_command, "run_target": run.backend.target} if warm_command else {}
    return runner.Phase(
        "run.yml",
        {
            "iolab_run_id": run.run_id,
            "run_drop_caches": run.drop_caches,
            "run_profilers": run.workload.profilers,
            **warm,
            **workload_vars(run),
            **ceph_osds.run_vars(run.backend),
        },
    )


def play_run(
    lab: Lab, phases: list[runner.Phase], run: Run, raw_dir: Path, title: str, hosts: list[str]
) -> runner.Result:
    """Play `phases` (run_phase(run) among them) on `hosts`, then put each host's files in raw_dir/<host>/.

    A host's run returns its files in its own output (iolab.host.hostrun), a failed run
    its failure record with them; a run whose files were too large for that leaves
    them for collect.yml to fetch. A host whose files cannot be fetched or read fails.
    """
    result = lab.play(phases, title, hosts=hosts)
    fetch = []
    for host in hosts:
        outcome = result.hosts.get(host)
        if outcome is None or outcome.unreachable:
            continue
        for archive in outcome.archives:  # a failure's record may follow the run's own files
            _extract(result, host, io.BytesIO(archive), raw_dir / host)
        if not outcome.archives and outcome.ok and not outcome.failed:
            fetch.append(host)
    if fetch:
        lab.console.print(
            f"{title}: fetching the run's files from {', '.join(fetch)} (over the size a run returns in its output)"
        )
        fetched = lab.play(
            runner.Phase("collect.yml", {"iolab_run_id": run.run_id, "iolab_collect_dest": str(raw_dir)}),
            f"collect: {title}",
            hosts=fetch,
            cancellable=False,
        )
        result.hosts.update({o.host: o for o in fetched.failures()})
        for host in fetch:
            archive = raw_dir / f"{host}.tar.gz"
            if archive.exists():
                with archive.open("rb") as data:
                    _extract(result, host, data, raw_dir / host)
                archive.unlink()
    return result


def _extract(result: runner.Result, host: str, data: IO[bytes], host_dir: Path) -> None:
    """Unpack a host's run archive into host_dir; an unreadable one fails the host in `result`."""
    import tarfile
    import zlib

    try:
        host_dir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=data) as tar:
            tar.extractall(host_dir, filter="data")
    except OSError as exc:
        if exc.errno in DISK_ERRORS:  # the results disk, not the host: stop before more is lost
            raise StoreError(
                f"could not store the files of {host} in {host_dir}: {exc.strerror}; that run is not "
                "stored (a resume runs it again); free space on the results disk or point "
                "$IOLAB_RESULTS elsewhere, then run the same command again"
            ) from None
        _unreadable(result, host, exc)
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        _unreadable(result, host, exc)


def _unreadable(result: runner.Result, host: str, exc: BaseException) -> None:
    """Fail `host` in `result`: the archive it returned cannot be read."""
    outcome = result.hosts.setdefault(host, runner.HostOutcome(host))
    outcome.failed, outcome.task = True, "unpack the run's files on the controller"
    outcome.message = f"the archive that came back is unreadable ({exc.__class__.__name__}: {exc})"


# --- turning a run's raw files into samples ---------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _host_samples(
    run: Run, host: str, host_dir: Path, warmed_by: str | None = None
) -> tuple[list[Sample], str | None, dict]:
    """Samples of one host and its per-second series, or the reason there are none."""
    error = _read_json(host_dir / "error.json")
    if error:
        return [], f"{error.get('task', 'a task')}: {runner.failure_message(error.get('result', {}))}", {}
    record = _read_json(host_dir / "run.json")
    try:
        parsed: Parsed = parser_for(run.workload.tool)(host_dir)
    except ParseError as exc:
        return [], str(exc), {}
    if parsed.error:
        return [], parsed.error, {}
    dropped = _read_json(host_dir / "drop_caches.json")
    metadata = {
        **parsed.metadata,
        "host": record.get("facts", {}),
        "start_skew_s": record.get("start_skew_s"),
        "page_cache_growth_bytes": record.get("page_cache_after", 0) - record.get("page_cache_before", 0),
        "cache_state": "dropped" if dropped else f"warm: {warmed_by}" if warmed_by else "not dropped (cache: keep)",
        "caches_dropped_at": dropped.get("dropped_at"),
        # The storage side's hosts (inventory group ceph_osd), dropped before the run too (run.yml).
        "storage_cache_state": _read_json(host_dir / "storage_drop_caches.json") or "no storage hosts in the inventory",
        "job": _read_json(host_dir / "fio_job.json"),
        "profiling": record.get("profiling"),  # the profilers' files beside the run's (raw/)
    }
    # Host telemetry (telemetry.jsonl, when the run kept one): its summaries join the tool's samples,
    # and the potential-caching check puts its flags and evidence in every sample of the host.
    from iolab.parsers import telemetry

    telemetry_measurements, telemetry_metadata = telemetry.merge(host_dir, parsed.measurements)
    metadata.update(telemetry_metadata)
    started, ended = record.get("started_at", time.time()), record.get("ended_at", time.time())
    samples = [
        Sample(
            campaign=run.campaign,
            run_id=run.run_id,
            repetition=run.repetition,
            host=host,
            backend=run.backend.name,
            workload=run.workload.name,
            metric=m.metric,
            value=m.value,
            unit=m.unit,
            started_at=utc_iso(started),
            ended_at=utc_iso(ended),
            params={**run.params, **m.params},
            metadata=metadata,
        )
        for m in [*parsed.measurements, *telemetry_measurements]
    ]
    # The verdict on this host's run as recorded (the repeats rule needs the other
    # repetitions: reports add it); every sample of the host shares this metadata.
    flags, notes = validity.host_run_check(samples) if samples else ([], [])
    metadata["validity"] = {
        "valid": not any(f.blocking for f in flags),
        "flags": [f.name for f in flags],
        "reasons": [f.reason for f in flags] + notes,
    }
    return samples, None, parsed.series


def aggregate(per_host: dict[str, tuple[list[Sample], dict]]) -> list[Sample]:
    """Host "*": additive metrics added up over the hosts, over the window in which all of them ran.

    Each host's value is its mean over the common window, from its per-second series
    (an interval counts when it lies inside the window); a tool without series falls
    back to the sum of the hosts' own means, and the metadata says which was used.
    Never a tool's own "all clients" line.
    """
    series = {host: s for host, (_, s) in per_host.items()}
    starts = [min(t for points in s.values() for t, _ in points) - 1 for s in series.values() if s]
    ends = [max(t for points in s.values() for t, _ in points) for s in series.values() if s]
    window = (max(starts), min(ends)) if len(starts) == len(series) and starts else None
    by_metric: dict[str, list[Sample]] = {}
    for samples, _ in per_host.values():
        for sample in samples:
            if sample.metric in ADDITIVE and not sample.params.get("syscall"):
                by_metric.setdefault(sample.metric, []).append(sample)
    out = []
    for metric, group in by_metric.items():
        if len(group) != len(per_host):
            continue
        in_window = [
            [
                v
                for t, v in series[s.host].get(metric, [])
                if window and t - 1 >= window[0] - 0.25 and t <= window[1] + 0.25
            ]
            for s in group
        ]
        if window and all(in_window):
            value = sum(sum(vs) / len(vs) for vs in in_window)
            method = f"sum over hosts of each host's mean over the common {window[1] - window[0]:.0f} s window"
            lo, hi = utc_iso(window[0]), utc_iso(window[1])
        else:
            value = sum(s.value for s in group)
            method = "sum of the hosts' own means (no per-second series for a common window)"
            lo, hi = max(s.started_at for s in group), min(s.ended_at for s in group)
        skews = [s.metadata.get("start_skew_s") or 0.0 for s in group]
        out.append(
            dataclasses.replace(
                group[0],
                host=AGGREGATE_HOST,
                value=value,
                started_at=lo,
                ended_at=hi,
                metadata={
                    "hosts": sorted(per_host),
                    "aggregate": method,
                    "validity": _verdict(group),
                    "start_late_max_s": max(skews),
                    "start_spread_s": max(skews) - min(skews),
                },
            )
        )
    return out + _checkpoint_aggregate(per_host)


def _verdict(group: list[Sample]) -> dict[str, Any]:
    """The hosts' verdicts on one metric, as one: valid when every host's is."""
    verdicts = [s.metadata.get("validity") or {} for s in group]
    return {
        "valid": all(v.get("valid", True) for v in verdicts),
        "flags": list(dict.fromkeys(f for v in verdicts for f in v.get("flags", []))),
        "reasons": [r for v in verdicts for r in v.get("reasons", [])],
    }


def _checkpoint_aggregate(per_host: dict[str, tuple[list[Sample], dict]]) -> list[Sample]:
    """A checkpoint over every host: all of its bytes over the slowest rank of all (MLPerf's duration)."""
    out = []
    for phase in ("write", "read"):
        times = [s for samples, _ in per_host.values() for s in samples if s.metric == f"checkpoint_{phase}_s"]
        if not times or len(times) != len(per_host):
            continue
        slowest = max(s.value for s in times)
        moved = {key: sum(s.metadata["checkpoint"][phase][key] for s in times) for key in ("bytes", "ranks")}
        metadata = {
            "hosts": sorted(per_host),
            "validity": _verdict(times),
            "checkpoint": {phase: moved},
            "aggregate": "every host's bytes over the slowest rank of all hosts",
        }
        out += [
            dataclasses.replace(times[0], host=AGGREGATE_HOST, metric=metric, value=value, unit=unit, metadata=metadata)
            for metric, value, unit in (
                (f"checkpoint_{phase}_bw", moved["bytes"] / slowest, "B/s"),
                (f"checkpoint_{phase}_s", slowest, "s"),
            )
        ]
    return out


def record_run(
    store: ResultStore,
    run: Run,
    result: runner.Result | None,
    hosts: list[str],
    complete: bool = True,
    warmed_by: str | None = None,
) -> tuple[list[str], list[Sample]]:
    """Store a run's samples and per-host status; return the failures as sentences, and the samples.

    The aggregate (host "*") is made only when every host of the run ran it together
    (`complete`), never from a resume that filled one host's gap.
    """
    per_host: dict[str, tuple[list[Sample], dict]] = {}
    records, failures = [], []
    outcomes = result.hosts if result else {}
    for host in hosts:
        outcome = outcomes.get(host)
        if outcome and (outcome.failed or outcome.unreachable):
            error = outcome.describe().split(": ", 1)[1]
            own = _read_json(store.raw_dir(run.run_id) / host / "error.json")  # the run's, before a later phase's
            if own and own.get("task") != outcome.task:
                error = (
                    f"failed at task '{own.get('task')}': {runner.failure_message(own.get('result', {}))}; then {error}"
                )
        elif result is None:
            error = "the run did not start"
        else:
            samples, error, series = _host_samples(run, host, store.raw_dir(run.run_id) / host, warmed_by)
            if not error:
                per_host[host] = (samples, series)
        records.append(_record(run, host, error))
        if error:
            failures.append(f"{run.label()}: failed on {host}: {error}")
    samples = [s for host_samples, _ in per_host.values() for s in host_samples]
    if per_host and not failures and complete:
        samples += aggregate(per_host)
    try:
        store.add_samples(samples, f"the {len(samples)} samples of {run.label()}")
    except StoreError as exc:
        # Not stored, so not done: say so in runs.jsonl where the disk still allows it, then stop.
        with contextlib.suppress(StoreError):
            store.add_run_records([_record(run, host, f"samples not stored: {exc}") for host in hosts])
        raise
    store.add_run_records(records, f"the status of {run.label()}")
    return failures, samples


def _record(run: Run, host: str, error: str | None) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "host": host,
        "backend": run.backend.name,
        "workload": run.workload.name,
        "repetition": run.repetition,
        "status": "failed" if error else "ok",
        "error": error,
        "at": utc_iso(time.time()),
    }


# --- the campaign loop --------------------------------------------------------------------------


def start_over(store: ResultStore) -> Path | None:
    """--no-resume: keep the old results, moved aside, and start with an empty store."""
    if not store.dir.exists():
        return None
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    moved = store.dir.with_name(f"{store.dir.name}.{stamp}")
    shutil.move(store.dir, moved)
    return moved


def headline(samples: list[Sample], failures: list[str], hosts: list[str]) -> str:
    """A run's line: its aggregate; or, with samples from some of its `hosts` only, "2 of 4 hosts" and their range.

    A failure comes first, with what the other hosts measured after it.
    """
    measured = sorted({s.host for s in samples if s.host != AGGREGATE_HOST})
    line = "no samples"
    for metric in HEADLINE:
        aggregate = [s for s in samples if s.metric == metric and s.host == AGGREGATE_HOST]
        per_host = [
            s for s in samples if s.metric == metric and s.host != AGGREGATE_HOST and not s.params.get("syscall")
        ]
        if aggregate:
            line = f"{metric} {human(aggregate[0].value, aggregate[0].unit)}"
        elif per_host:
            low, high = min(s.value for s in per_host), max(s.value for s in per_host)
            value = human(low, per_host[0].unit) + ("" if low == high else f" to {human(high, per_host[0].unit)}")
            line = f"{len(measured)} of {len(hosts)} hosts ({', '.join(measured)}): {metric} {value} per host"
        if aggregate or per_host:
            break
    if not failures:
        return line
    return f"[red]failed[/] {failures[0]}" + (f"; {line}" if measured else "")


def run_campaign(
    campaign: Campaign, lab: Lab, store: ResultStore, resume: bool = True, only_repetition: int | None = None
) -> list[str]:
    """Run what is missing of a campaign on the lab's hosts; return the failures.

    `only_repetition`: that repetition and no other (bench.fio: each call is one new
    repetition on the hosts it selects, not also the gaps earlier calls left on them).

    A host that fails or cannot be reached is left out of the rest of the campaign
    (or stops it, with on_host_failure: abort); its runs are recorded as failed and
    a later call runs exactly those (run, host) pairs again. Repeats that disagree
    get more repetitions, up to the campaign's max_repetitions.
    """
    console = lab.console
    if not resume:
        moved = start_over(store)
        if moved:
            console.print(f"--no-resume: earlier results kept in {moved}")
    for note in store.preflight():  # writable, with room, no torn line: before anything runs
        console.print(f"[yellow]{note}[/]")
    runs = [r for r in expand(campaign, len(lab.hosts)) if only_repetition in (None, r.repetition)]
    done = store.completed()
    plan = [(r, [h for h in r.on(lab.hosts) if (r.run_id, h) not in done]) for r in runs]
    plan = [(r, hosts) for r, hosts in plan if hosts]
    extra = campaign.max_repetitions is not None and campaign.max_repetitions > campaign.repetitions
    queues = {
        backend: [(r, hosts) for r, hosts in plan if r.backend.name == backend]
        + ([(r, r.on(lab.hosts)) for r in _more_repetitions(campaign, store, runs, backend)] if extra else [])
        for backend in dict.fromkeys(r.backend.name for r in runs)
    }  # extra: stored repeats that disagree
    queues = {backend: queue for backend, queue in queues.items() if queue}
    progress = Progress(_planned([r for queue in queues.values() for r, _ in queue]), console)
    console.print(
        f"campaign [bold]{campaign.name}[/]: {len(runs)} runs on {len(lab.hosts)} host(s), "
        f"{len(runs) - len(plan)} already stored, {len(plan)} to run"
        + (f" (and more repetitions, up to {campaign.max_repetitions}, where repeats disagree)" if extra else "")
        + (f"; {progress.status()}" if queues else ""),
        soft_wrap=True,
    )
    if not queues:
        return []
    lab.status = progress.status
    if len(plan) == 1 and not extra and not _needs_warming(plan[0][0]) and not _searches(plan[0][0]):
        return _run_fused(lab, campaign, store, *plan[0], progress)
    failures: list[str] = []
    lost: dict[str, str] = _provision(campaign, lab)
    for host, reason in lost.items():
        console.print(f"[yellow]{host} left out:[/] {reason}")
    counter = itertools.count(1)
    for backend, queue in queues.items():
        failures += _run_backend(campaign, lab, store, backend, queue, runs, lost, counter, len(plan), progress)
    return failures


def _searches(run: Run) -> bool:
    """A run that is a search (iolab.accelerators), not one measurement."""
    return getattr(run.workload, "search", None) is not None


def _planned(runs: list[Run]) -> list[Planned]:
    """The runs as Progress plans them: runs of one workload take alike times; estimates as --dry-run's."""
    warmed: set[tuple] = set()
    return [Planned(run.run_id, run.workload.name, _run_estimate(run, warmed)[0]) for run in runs]


def _run_backend(
    campaign: Campaign,
    lab: Lab,
    store: ResultStore,
    backend: str,
    queue: list[tuple[Run, list[str]]],
    runs: list[Run],
    lost: dict[str, str],
    counter: Iterator[int],
    planned: int,
    progress: Progress,
) -> list[str]:
    """Mount one backend, run its queue (and the extra repetitions disagreeing repeats earn), unmount."""
    console = lab.console
    failures: list[str] = []
    need = [h for h in lab.hosts if h not in lost and any(h in hosts for _, hosts in queue)]
    mounted: list[str] = []
    teardown = list(need)  # every host the mount reached, even if Ctrl-C cut it short
    warmed: set[tuple] = set()  # points that had their warm-up run on this mount
    previous: tuple[Run, list[str], bool] | None = None  # the run just run, its hosts, whether it succeeded
    tried: set[str] = set()  # run ids run on this mount: an extra repetition that failed is not retried
    try:
        mount = lab.play(storage_phase(campaign, backend, "mounted"), f"mount {backend}", hosts=need)
        mounted = mount.ok_hosts()
        for outcome in mount.failures():
            lost[outcome.host] = f"mounting {backend} failed: {outcome.message}"
            if outcome.unreachable:
                teardown.remove(outcome.host)
        no_data = datasets.make(lab, campaign, backend, [r for r in runs if r.backend.name == backend], mounted)
        while queue:
            for run, hosts in queue:
                number = next(counter)
                title = f"run {number}/{planned}: {run.label()}" if number <= planned else f"extra run: {run.label()}"
                failures += _skipped(store, run, [h for h in hosts if h not in mounted], lost)
                active = [h for h in hosts if h in mounted]
                if run.workload.uses_dataset:
                    failures += _skipped(store, run, [h for h in active if h in no_data], no_data)
                    active = [h for h in active if h not in no_data]
                if not active:
                    progress.drop(run.run_id)
                    continue
                progress.start(_planned([run])[0])
                if _searches(run):
                    from iolab import accelerators

                    console.print(
                        f"{title}: searching the most {run.workload.accelerator.type} accelerators per "
                        f"host at AU ≥ {accelerators.THRESHOLD:g} % (up to {run.workload.accelerators})",
                        soft_wrap=True,
                    )
                    run_failures, stored = accelerators.fed(
                        lab, campaign, store, run, active, lambda line: console.print(line, soft_wrap=True)
                    )
                    result = None
                else:
                    warmed_by = _warm(lab, store, run, active, warmed, previous)
                    warm_command = bool(run.cache_pass == "warm" and run.workload.warm_command)
                    result = play_run(
                        lab, [run_phase(run, warm_command)], run, store.raw_dir(run.run_id), title, active
                    )
                    run_failures, stored = record_run(
                        store, run, result, active, complete=active == run.on(lab.hosts), warmed_by=warmed_by
                    )
                failures += run_failures
                previous = (run, active, not run_failures)
                for outcome in result.failures() if result else []:
                    if outcome.unreachable:
                        lost[outcome.host] = f"unreachable since {title}: {outcome.message}"
                        mounted.remove(outcome.host)
                        teardown.remove(outcome.host)
                        console.print(
                            f"[yellow]{outcome.host} is unreachable:[/] left out of the rest; "
                            "run bench.all again later to fill its gap"
                        )
                progress.finish(title, headline(stored, run_failures, run.on(lab.hosts)))
            tried.update(r.run_id for r, _ in queue)
            queue = [
                (r, r.on(lab.hosts)) for r in _more_repetitions(campaign, store, runs, backend) if r.run_id not in tried
            ]
    finally:
        if teardown:
            failures += tear_down(lab, campaign, backend, teardown)
    return failures


def tear_down(lab: Lab, campaign: Campaign, backend: str, hosts: list[str]) -> list[str]:
    """Stop this command's tools and remove its run files on `hosts`, unmount `backend`, and check that nothing
    of it is left (the roles probe the mount, iolab.host.hostrun the tools); what is left is said now (after
    Ctrl-C no summary follows) and kept in teardown_left."""
    unmount = lab.play(
        storage_phase(campaign, backend, "unmounted", stop_tools=True),
        f"unmount {backend}",
        hosts=hosts,
        cancellable=False,
    )
    left = [f"unmounting {backend} failed: {outcome.describe()}" for outcome in unmount.failures()]
    for line in left:
        lab.console.print(f"[red]{line}[/]")
    teardown_left.extend(left)
    return left


def _needs_warming(run: Run) -> bool:
    return run.workload.warmup or run.cache_pass == "warm"


def _warm(
    lab: Lab,
    store: ResultStore,
    run: Run,
    hosts: list[str],
    warmed: set[tuple],
    previous: tuple[Run, list[str], bool] | None,
) -> str | None:
    """Warm-up before `run` as its workload asks; return how a warm run's cache was warmed (None: cold run).

    `warmup: true`: one unrecorded run of the point before its first measured one on this
    mount. The warm run of cache: warm follows its warm_command (run.yml runs it), or
    the cold run of the same repetition when that just ran on the same hosts, or else an
    unrecorded pass of the workload.
    """
    key = (run.point[:3], tuple(hosts))
    if run.workload.warmup and key not in warmed:
        _warm_up_pass(lab, store, run, hosts, "warm-up run (warmup: true)")
        warmed.add(key)
    if run.cache_pass != "warm":
        return None
    if run.workload.warm_command:
        return "after the warm_command " + " ".join(run.workload.warm_command)
    if (
        previous
        and previous[2]
        and previous[1] == hosts
        and previous[0].cache_pass == "cold"
        and previous[0].point[:3] == run.point[:3]
        and previous[0].repetition == run.repetition
    ):
        return "right after the cold run of the same repetition, caches not dropped"
    _warm_up_pass(lab, store, run, hosts, "warm-up pass (cache: warm)")
    return "after an unrecorded pass of the workload, caches not dropped"


def _warm_up_pass(lab: Lab, store: ResultStore, run: Run, hosts: list[str], what: str) -> None:
    """An unrecorded run of `run`'s workload (its files are fetched and discarded); a failure is a warning."""
    warm = run.model_copy(update={"run_id": f"{run.run_id}-warmup", "cache_pass": "warm"})
    scratch = store.raw_dir(warm.run_id)
    try:
        result = play_run(lab, [run_phase(warm)], warm, scratch, f"{what}: {run.label()}", hosts)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    errors = [o.describe() for o in result.failures()]
    if errors:
        lab.console.print(f"[yellow]{what} of {run.label()} failed[/] (the measured run follows): {errors[0]}")
    else:
        lab.console.print(f"{what} of {run.label()}: done, not recorded")


def _more_repetitions(campaign: Campaign, store: ResultStore, runs: list[Run], backend: str) -> list[Run]:
    """The next repetition of every point on `backend` whose stored repeats disagree, up to max_repetitions.

    A point's repeats are its runs in `runs` and the extra repetitions already stored
    (from this call or an earlier one). A point with a repetition not stored (failed,
    or left out) waits for the next call, which fills that gap first.
    """
    cap = campaign.max_repetitions or campaign.repetitions
    if cap <= campaign.repetitions:
        return []
    samples = store.samples()
    stored = {s.run_id for s in samples}
    chains: dict[tuple, list[Run]] = {}
    for run in runs:
        if run.backend.name == backend:
            chains.setdefault(run.point, []).append(run)
    nexts: dict[tuple, Run] = {}
    for point, chain in chains.items():
        while True:
            last = max(chain, key=lambda r: r.repetition)
            following = next(
                r
                for r in repetition(campaign, last.backend, last.workload, last.repetition + 1, last.hosts)
                if r.cache_pass == last.cache_pass
            )
            if following.run_id not in stored:
                break
            chain.append(following)
        if last.repetition < cap and all(r.run_id in stored for r in chain):
            nexts[point] = following
    ids = {r.run_id: point for point, chain in chains.items() for r in chain}
    disagreeing = {
        ids[run_id]
        for g in validity.groups([s for s in samples if s.run_id in ids])
        if g.metric in validity.MERIT_METRICS and len(g.values) > 1 and not g.agree
        for run_id in g.run_ids
    }
    return [run for point, run in nexts.items() if point in disagreeing]


def _provision(campaign: Campaign, lab: Lab) -> dict[str, str]:
    """Set the hosts up; those that fail are left out (skip) or stop the campaign (abort)."""
    setup = lab.play(runner.Phase("setup.yml", campaign.setup_vars()), "setup")
    failed = {o.host: o.describe().split(": ", 1)[1] for o in setup.failures()}
    if setup.status not in ("successful", "failed") or (setup.status == "failed" and not failed):
        raise RunFailed(f"provisioning the hosts failed: {setup.summary()}")
    if failed and (campaign.on_host_failure == "abort" or len(failed) == len(lab.hosts)):
        raise RunFailed(
            f"provisioning failed ({'on_host_failure: abort' if len(failed) < len(lab.hosts) else 'on every host'}): "
            f"{setup.summary()}"
        )
    return failed


def _skipped(store: ResultStore, run: Run, hosts: list[str], lost: dict[str, str]) -> list[str]:
    """Record a run as failed on hosts left out of it, with the reason."""
    if not hosts:
        return []
    store.add_run_records([_record(run, h, f"not run: {lost.get(h, 'host left out')}") for h in hosts])
    return [
        f"{run.workload.name} on {run.backend.name} (rep {run.repetition}) not run on {h}: "
        f"{lost.get(h, 'host left out')}"
        for h in hosts
    ]


def _run_fused(
    lab: Lab, campaign: Campaign, store: ResultStore, run: Run, hosts: list[str], progress: Progress
) -> list[str]:
    """One run: every phase in one ansible-playbook process (saves ≈1 s per phase)."""
    backend = run.backend.name
    phases = [
        runner.Phase("setup.yml", campaign.setup_vars()),
        storage_phase(campaign, backend, "mounted"),
        *([datasets.phase(campaign, backend)] if datasets.needed(campaign, [run]) else []),
        run_phase(run),
        storage_phase(campaign, backend, "unmounted"),
    ]
    result, left = None, []
    progress.start(_planned([run])[0])
    try:
        result = play_run(lab, phases, run, store.raw_dir(run.run_id), f"{run.workload.name} on {backend}", hosts)
    finally:
        if result is None or result.failures() or result.status != "successful":
            left = tear_down(lab, campaign, backend, hosts)
    failures, stored = record_run(store, run, result, hosts, complete=hosts == run.on(lab.hosts))
    failures += left
    progress.finish(f"{run.workload.name} on {backend}", headline(stored, failures, run.on(lab.hosts)))
    return failures


# --- one-off fio runs and dry runs --------------------------------------------------------------


def single_fio(
    spec: Campaign, backend: str | None, profile: str, runtime: str, ramp: str, size: str | None
) -> Campaign:
    """A one-run campaign 'fio-<backend>' for `bench.fio`, validated like any campaign file."""
    from iolab.campaign import parse

    names = [b.name for b in spec.backends]
    chosen = backend or names[0]
    if chosen not in names:
        raise UserError(
            f"backend {chosen!r} is not in campaign {spec.name} (it has: {', '.join(names)}); pass --backend NAME"
        )
    workload: dict[str, Any] = {
        "name": Path(profile).stem if profile not in fio_jobs.PROFILES else profile,
        "type": "fio",
        "runtime": runtime,
        "ramp": ramp,
    }
    if profile in fio_jobs.PROFILES:
        workload["profile"] = profile
    elif Path(profile).exists():
        workload["jobfile"] = str(Path(profile).resolve())
    else:
        raise UserError(
            f"--profile {profile!r} is neither a fio profile ({', '.join(fio_jobs.PROFILES)}) nor an existing job file"
        )
    if size:
        workload["size"] = size
    backend_spec = next(b for b in spec.backends if b.name == chosen)
    raw = {"name": f"fio-{chosen}", "backends": [backend_spec.model_dump(exclude_none=True)], "workloads": [workload]}
    return parse(raw, "bench.fio flags", Path.cwd())


def next_repetition(spec: Campaign, store: ResultStore) -> Campaign:
    """The same one-run campaign with the first repetition not stored yet (earlier ones are kept)."""
    done = {run_id for run_id, _ in store.completed()}
    repetition = 1
    while expand(spec.model_copy(update={"repetitions": repetition}))[-1].run_id in done:
        repetition += 1
    return spec.model_copy(update={"repetitions": repetition})


ORCHESTRATION_S = 4.0  # per run: drop caches, start together, collect (docs/PERFORMANCE.md)


def _estimate(runs: list[Run]) -> tuple[float, int]:
    """(seconds, runs not estimated): fio runs take runtime + ramp; loaders take as long as their data set."""
    warmed: set[tuple] = set()
    estimates = [_run_estimate(run, warmed) for run in runs]
    return sum(seconds for seconds, _ in estimates), sum(not known for _, known in estimates)


def _run_estimate(run: Run, warmed: set[tuple]) -> tuple[float, bool]:
    """(seconds, whether that is more than the orchestration) of one run; `warmed`: points warmed up already."""
    passes = 1
    if run.workload.warmup and run.point[:3] not in warmed:
        warmed.add(run.point[:3])
        passes += 1
    if run.workload.tool == "fio":
        return passes * (run.workload.runtime + run.workload.ramp + ORCHESTRATION_S), True
    return passes * ORCHESTRATION_S, False


def _cache_line(run: Run) -> str:
    workload = run.workload
    line = {
        "drop": "caches dropped before each run (sync; echo 3 > /proc/sys/vm/drop_caches)",
        "keep": "caches kept as the previous run left them",
        "warm": "each repetition twice: cold (caches dropped), then warm (after "
        + (
            "the warm_command " + " ".join(workload.warm_command) + ", in " + run.backend.target
            if workload.warm_command
            else "the cold run, or an unrecorded pass of the workload"
        )
        + ")",
    }[workload.cache]
    if workload.warmup:
        line += "; one unrecorded warm-up run first"
    return line + f"; stopped after {workload.run_timeout(_default_timeout(run)):g} s"


def _default_timeout(run: Run) -> float:
    """The run's time limit as its bench role gets it."""
    return float(next(v for k, v in workload_vars(run).items() if k.endswith("_timeout")))


def describe(spec: Campaign, lab: Lab) -> str:
    """--dry-run: the runs, what each host would run and a time estimate, without touching a host."""
    from iolab.hosts import compress

    runs = expand(spec)
    seconds, unknown = _estimate(runs)
    estimate = f"about {seconds / 60:.0f} min" if seconds >= 60 else f"about {seconds:.0f} s"
    if unknown:
        estimate += f" plus the {unknown} data-loading run(s), as long as their data set takes to read"
    lines = [
        f"campaign {spec.name}: {len(runs)} runs on {compress(lab.hosts)}, "
        + (
            "in random order (order_seed " + str(spec.order_seed) + ")"
            if spec.order == "random"
            else "in the order written"
        )
        + f" ({estimate}; ≈{ORCHESTRATION_S:g} s of orchestration per run)"
    ]
    if spec.max_repetitions and spec.max_repetitions > spec.repetitions:
        lines.append(f"  repeats that disagree (more than 5% apart) get more repetitions, up to {spec.max_repetitions}")
    if spec.dataset:
        packs = f", with packed copies ({', '.join(spec.dataset_formats)})" if spec.dataset_formats else ""
        lines.append(
            f"  data set: {spec.dataset.files} {spec.dataset.kind} files (seed {spec.dataset.seed}, "
            f"{spec.dataset.classes} classes){packs}: on writable backends each host's own copy, "
            f"made after mounting at <target>/iolab-<host>/{DATASET_DIR} where not there already; "
            f"read-only backends hold one at <target>/{DATASET_DIR}"
        )
    values: dict[tuple[str, str], set[str]] = {}
    for run in runs:
        for key, value in run.params.items():
            values.setdefault((run.workload.name, key), set()).add(json.dumps(value))
    shown: set[str] = set()
    for run in runs:
        point = " ".join(f"{k}={v}" for k, v in run.params.items() if len(values[(run.workload.name, k)]) > 1)
        lines.append(f"  {run.run_id}  {run.backend.name:<10} {run.workload.name:<14} rep {run.repetition}  {point}")
        if run.workload.name in shown:
            continue
        shown.add(run.workload.name)
        lines.append(f"      {_cache_line(run)}")
        variables = workload_vars(run)
        if run.workload.tool != "fio":
            lines.append(
                f"      on each host: {run.workload.describe()}; role {variables['run_role']} "
                f"builds the command (python -m iolab.host.loader.…, under iolab.host.hostrun) from:"
            )
            lines += [f"        {key}: {json.dumps(value)}" for key, value in variables.items() if key != "run_role"]
            continue
        if variables.get("bench_fio_jobtext"):  # the user's job file as checked, includes inlined
            job = f"; {run.workload.jobfile}, run in <target>/iolab-<host>\n" + variables["bench_fio_jobtext"]
        else:
            bssplit = (
                {"bssplit": "<from the data set's size histogram>"} if variables.get("bench_fio_bssplit_from") else {}
            )
            job = fio_jobs.render(
                {
                    **variables["bench_fio_options"],
                    **bssplit,
                    "filename": "<target>/iolab-<host>/" + fio_jobs.DATA_FILE,
                    "size": str(variables["bench_fio_size"] or "<fits>"),
                },
                "iolab",
            )
        lines.append("      on each host: fio --output=fio.json --output-format=json+ job.fio, where job.fio is:")
        lines += ["        " + line for line in job.splitlines() if line]
    return "\n".join(lines)
