"""Run a campaign: for each backend mount, for each run drop caches → tool → collect, always unmount.

The campaign loop: which runs, on which hosts, in what order (resume, more repetitions
where repeats disagree), each backend's through a backend session (iolab.run.session: the
mount, the data set, the batches of runs, warm-ups, the unmount). What a run measured on each host becomes
samples as soon as the run ends, so an interruption loses nothing already gathered, and
a later call runs only what is missing.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from iolab import faults
from iolab.backends.base import DATASET_DIR
from iolab.campaign.model import Campaign, Run, expand
from iolab.campaign.repeats import more_repetitions
from iolab.drive import reach
from iolab.drive.execute import Lab, workload_vars
from iolab.errors import RunFailed
from iolab.kinds import hostcall
from iolab.measures.samples import ResultStore
from iolab.run import accelerators, kvcache_search
from iolab.run import plan as planning
from iolab.run.plan import Entry
from iolab.run.session import BackendSession, CampaignState
from iolab.units import counted

# What a workload's `search:` names, and who answers it on a mounted backend (BackendSession.search).
SEARCHES = {
    "accelerators": accelerators.searched,
    "users": kvcache_search.searched,
    "clients": kvcache_search.searched,
}

# --- the campaign loop --------------------------------------------------------------------------


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
    plan, progress = planning.make(campaign, lab, store, resume, only_repetition)
    queues, runs = plan.queues, plan.runs
    console.print(
        f"campaign [bold]{campaign.name}[/]: {counted(len(runs), 'run')} on {len(lab.hosts)} host(s), "
        f"{len(runs) - len(plan.todo)} already stored, {len(plan.todo)} to run"
        + (f" (and more repetitions, up to {campaign.max_repetitions}, where repeats disagree)" if plan.extra else "")
        + (f"; {progress.status()}" if queues else ""),
        soft_wrap=True,
    )
    if not queues:
        return []
    lab.status = progress.status
    state = CampaignState(campaign, lab, store, progress, planned=len(plan.todo))  # provisioning waits for a playbook
    failures: list[str] = []
    for backend, queue in queues.items():
        failures += _run_backend(state, backend, queue, runs, plan.extra)
    return failures


def outcome(failures: list[str], store: ResultStore) -> str:
    """bench.all's and bench.fio's last line: where the results are; or, after failures, RunFailed saying them."""
    if failures:
        shown = "; ".join(failures[:3]) + (f" (and {len(failures) - 3} more)" if len(failures) > 3 else "")
        raise RunFailed(
            f"{len(failures)} failure(s): {shown}. Results so far are in {store.dir}; "
            "run the same command again to retry what failed"
        )
    return f"results in {store.dir}; `./lab report --campaign {store.dir.name}` compares them"


def _run_backend(state: CampaignState, backend: str, queue: list[Entry], runs: list[Run], extra: bool) -> list[str]:
    """Run one backend's queue, and the extra repetitions its disagreeing repeats earn, in one backend session
    (iolab.run.session: mount, data set, batches of runs, unmount); a search (iolab.run.accelerators) plays alone.

    `runs`: the campaign's runs (more repetitions are counted from them); `extra`: more may follow."""
    lab = state.lab
    need = [h for h in lab.hosts if h not in state.lost and any(h in entry.hosts for entry in queue)]
    tried: set[str] = set()  # run ids run on this mount: an extra repetition that failed is not retried
    with BackendSession(state, backend, need, [r for r in runs if r.backend.name == backend]) as session:
        while queue:
            state.plans.update({entry.run.run_id: planning.planned([entry.run])[0] for entry in queue})
            parts = planning.parts(queue)
            for number, part in enumerate(parts, 1):
                if search := planning.search_of(part[0].run):  # the accelerators fed, a KV-cache's users or clients
                    session.search(*part[0], functools.partial(SEARCHES[search], session, part[0].run))
                else:  # the last runs of the backend: unmounted with them, unless more repetitions may follow
                    session.play(part, last=number == len(parts) and not extra)
            tried.update(entry.run.run_id for entry in queue)
            more = more_repetitions(state.campaign, state.store.samples(), runs, backend) if extra else []
            queue = [Entry(r, r.on(lab.hosts)) for r in more if r.run_id not in tried]
    return session.failures


# --- one-off fio runs and dry runs --------------------------------------------------------------


def next_repetition(spec: Campaign, store: ResultStore) -> Campaign:
    """The same one-run campaign with the first repetition not stored yet (earlier ones are kept)."""
    done = {run_id for run_id, _ in store.completed()}
    repetition = 1
    while expand(spec.model_copy(update={"repetitions": repetition}))[-1].run_id in done:
        repetition += 1
    return spec.model_copy(update={"repetitions": repetition})


def _cache_line(run: Run, variables: dict[str, Any]) -> str:
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
    return line + f"; stopped after {workload.run_timeout(_default_timeout(variables)):g} s"


def _default_timeout(variables: dict[str, Any]) -> float:
    """The run's time limit as its bench role gets it (`variables`: the run's, execute.workload_vars)."""
    return float(next(v for k, v in variables.items() if k.endswith("_timeout")))


def _dataset_lines(spec: Campaign, files_at_run_time: bool) -> list[str]:
    """--dry-run's data set: what it is and where each backend's hosts get it."""
    if spec.dataset is None:
        return []
    packs = f", with packed copies ({', '.join(spec.dataset_formats)})" if spec.dataset_formats else ""
    lines = [
        f"  data set: {'at least ' if files_at_run_time else ''}{spec.dataset.files} {spec.dataset.kind} files "
        f"(seed {spec.dataset.seed}, {spec.dataset.classes} classes){packs}: on writable backends each host's own "
        f"copy, made after mounting at <target>/iolab-<host>/{DATASET_DIR} where not there already; "
        f"read-only backends hold one at <target>/{DATASET_DIR}"
    ]
    if files_at_run_time:
        lines.append(
            "    files: auto: the number is decided at run time from the hosts' RAM, which a dry run does not read; "
            f"the run ids below are for {spec.dataset.files} files"
        )
    lines += [f"    on {backend.name}: {note}" for backend in spec.backends if (note := backend.dataset_note())]
    return lines


def describe(spec: Campaign, lab: Lab, files_at_run_time: bool = False) -> str:
    """--dry-run: the runs, what each host would run and a time estimate, without touching a host.

    `files_at_run_time`: the data set is `files: auto`, sized here without the hosts' RAM."""
    from iolab.campaign.hosts import compress

    runs = expand(spec)
    seconds, unknown = planning.estimate(runs)
    estimate = f"about {seconds / 60:.0f} min" if seconds >= 60 else f"about {seconds:.0f} s"
    if unknown:
        estimate += f" plus the {unknown} data-loading run(s), as long as their data set takes to read"
    lines = [
        f"campaign {spec.name}: {counted(len(runs), 'run')} on {compress(lab.hosts)}, "
        + (
            "in random order (order_seed " + str(spec.order_seed) + ")"
            if spec.order == "random"
            else "in the order written"
        )
        + f" ({estimate}; ≈{planning.ORCHESTRATION_S:g} s of orchestration per run)"
    ]
    if spec.max_repetitions and spec.max_repetitions > spec.repetitions:
        lines.append(f"  repeats that disagree (more than 5% apart) get more repetitions, up to {spec.max_repetitions}")
    ruled = sorted({w.name for w in spec.workloads if w.mlperf_rules})
    if ruled:
        lines.append(
            f"  MLPerf Storage v3.0's rules (mlperf: true) for {', '.join(ruled)}: each rule a run breaks is "
            "flagged with its number (docs/REFERENCE_FIGURES.md)"
        )
    if gated := reach.topology(lab.inventory, lab.hosts):
        lines.append(
            f"  runs of {', '.join(sorted(k.removeprefix('bench_') for k in hostcall.KINDS))} go through the "
            f"ClusterShell gateways {', '.join(gated[1])} (topology {gated[0]}); every change to a host (mounts, "
            "data set, teardown) and the other kinds' runs go through Ansible's own ssh"
        )
    for name, command in dict.fromkeys((w.name, c) for w in spec.workloads for c in w.commands()):
        lines.append(f"  workload {name}: {command} (only with bench.all --allow-commands)")
    lines += _dataset_lines(spec, files_at_run_time)
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
        variables = workload_vars(run)
        lines.append(f"      {_cache_line(run, variables)}")
        lines += ["      " + line for line in faults.describe(run.workload)]
        lines += ["      " + line for line in run.workload.dry_run(variables)]
    return "\n".join(lines)
