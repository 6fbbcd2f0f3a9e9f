"""`./lab bench.all` and `./lab bench.fio`, whole: each task hands its flags over in one call.

bench.all: load the campaign (one pass: each entry's kind expands itself, then the rules and the size check), the
hosts' known GPU counts, `--dry-run`'s description or the operator's leave for warm-up commands, then, under the
hosts' lease, the campaign loop (iolab.run.bench) into the campaign's store, and its last line.
"""

from __future__ import annotations

from pathlib import Path

from iolab import paths
from iolab.backends.base import Backend
from iolab.campaign import gpus
from iolab.campaign import model as campaign_mod
from iolab.drive import direct, lease
from iolab.kinds.fio import workload as fio_workload
from iolab.results import store as results_store
from iolab.run import bench
from iolab.run.cli import echo
from iolab.run.cli import lab as make_lab


def campaign(
    inventory: str | None,
    hosts: str | None,
    path: str | Path,
    *,
    max_runs: int,
    workload_file: str | None,
    dry_run: bool,
    resume: bool,
    steal: bool,
    allow_commands: bool,
) -> None:
    """Run a campaign file on the hosts (bench.all), or describe it (`dry_run`: no host is touched)."""
    lab = make_lab(inventory, hosts)
    sized_without_ram = []

    def memory() -> list[int | None]:  # asked only by dataset.files: auto and MLPerf's size rule
        if dry_run:  # a dry run touches no host: MLPerf's floor without the RAM, and it says so
            sized_without_ram.append(True)
            return [None] * len(lab.hosts)
        return direct.memory(lab.inventory, lab.hosts)

    spec = campaign_mod.load(path, max_runs=max_runs, workload_file=workload_file, memory=memory)
    gpus.check_hosts(spec, lab.hosts, paths.results_root())  # a GPU count a host is known to lack: refused here
    campaign_mod.check_commands(spec, path, allow_commands or dry_run)  # a dry run names them, running nothing
    if dry_run:
        echo(bench.describe(spec, lab, files_at_run_time=bool(sized_without_ram)))
        return
    with lease.held(lab, f"campaign {spec.name}", steal):
        store = results_store.open_store(paths.results_root(), spec.name)
        echo(bench.outcome(bench.run_campaign(spec, lab, store, resume=resume), store))


def one_fio(
    inventory: str | None,
    hosts: str | None,
    path: str | Path,
    *,
    backend: str | None,
    profile: str,
    runtime: str,
    ramp: str,
    size: str | None,
    steal: bool,
) -> None:
    """bench.fio: one fio job on one of the campaign file's backends, as the next repetition of the campaign
    'fio-<backend>'."""
    spec = campaign_mod.load(path)
    lab = make_lab(inventory, hosts)
    backends: list[Backend] = list(spec.backends)
    single = fio_workload.single_run(backends, backend, profile, runtime, ramp, size)
    one = campaign_mod.parse(single, "bench.fio flags", Path("."))
    with lease.held(lab, f"bench.fio (campaign {one.name})", steal):
        store = results_store.open_store(paths.results_root(), one.name)
        one = bench.next_repetition(one, store)
        echo(bench.outcome(bench.run_campaign(one, lab, store, only_repetition=one.repetitions), store))
