"""The KV-cache offload workload on one host: its clients (ranks), their results, the run's summary (host side).

    python -m iolab.kinds.kvcache.host prepare --host NAME --run-dir RUN_DIR --dir WORKDIR --clients N --options JSON
                                       [--pause S] [--drop-caches]
    python -m iolab.kinds.kvcache.host check --dir WORKDIR --clients N --options JSON
    python -m iolab.kinds.kvcache.host run   --dir WORKDIR --out RUN_DIR --clients N --options JSON [--option K]

`run` forks N ranks (clients, as MLPerf Storage's MPI ranks are), each simulating its users on its own
directory WORKDIR/rank_<k> (iolab.host.kvcache_sim); all start together once each has made its
data pool, run for the duration, write RUN_DIR/rank_<k>/kvcache_results_<k>.json in kv-cache.py's
result shape and remove their files. Then `summarize` writes RUN_DIR/kvcache_run_summary.json,
the ranks added up as MLPerf Storage's rules 6.3.4 add them (`mlperf-kvcache`'s ranks go through
the same function): bandwidths and token rates summed, the device P95s the most of the ranks'.

`prepare` is the run's: the check below in the work directory it makes for it, the pause between options, then the
run directory and the drop (iolab.host.prepare's `ready`); host_reference's prepare, kv-cache.py's, is the same
with its own refusal and mpirun's key. `check` (and `run`, first) refuses in one line when the target's file
system could not take each rank's largest entry without passing 9/10 full, or when the ranks' tiers, pools and
reads in flight would not fit this host's available memory. The options are iolab.host.kvcache_tiers.Settings' fields.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iolab.host import facts, prepare, runs
from iolab.host.kvcache_sim import MAX_WORKERS, Rank
from iolab.host.kvcache_tiers import FILL_LIMIT, POOL, Settings
from iolab.shared.kvcache_model import entry_bounds, mean_entry

RESULTS = "kvcache_results_*.json"  # a rank's result file, in RUN_DIR/rank_<k>/ (kv-cache.py's --output)
SUMMARY = "kvcache_run_summary.json"
GIB = 1 << 30
SAID = {"read": "read", "write": "written"}  # how kv-cache.py's result names each operation's bytes


def room(directory: Path) -> int:
    """Bytes the target takes before its file system is 9/10 full (iolab's limit on every run's writes)."""
    usage = shutil.disk_usage(directory)
    return max(0, int(FILL_LIMIT * usage.total) - usage.used)


def footprint(options: dict[str, Any]) -> int:
    """A rank's memory at its fullest: its memory tiers, its pool and two copies of a mean entry per worker (the
    reference's own estimate: np.load's array and its copy)."""
    settings = Settings(**options)
    _, most = entry_bounds(settings.per_token, settings.context_scale)
    workers = min(settings.users, MAX_WORKERS)
    mean = mean_entry(settings.per_token, settings.context_scale)
    return int(settings.gpu_bytes + settings.cpu_bytes + min(POOL, most) + workers * 2 * mean)


def refusal(directory: Path, clients: int, options: dict[str, Any]) -> str | None:
    """Why this host cannot run `clients` ranks of the workload, or None."""
    settings = Settings(**options)
    _, most = entry_bounds(settings.per_token, settings.context_scale)
    free = room(directory)
    if free < clients * most:
        return (
            f"{directory}: {clients} client(s) need room for at least one entry each ({most >> 20} MiB, the "
            f"largest this workload writes) and the target takes {free >> 20} MiB before it is 9/10 full; "
            "give the backend more space, or lower clients or context_scale"
        )
    need, available = clients * footprint(options), facts.meminfo().get("MemAvailable")
    if available is None or need > available:
        has = "no MemAvailable in /proc/meminfo" if available is None else f"{available >> 20} MiB available"
        return (
            f"{clients} client(s) of {settings.users} user(s) need about {need >> 20} MiB of memory on this host "
            f"(tiers, data pool, two copies of a mean entry per user) and it has {has}; lower users, clients, "
            "context_scale or the tiers"
        )
    return None


def _rank(index: int, directory: Path, out: Path, options: dict[str, Any], budget: float, barrier) -> None:
    mine = directory / f"rank_{index}"
    mine.mkdir(parents=True, exist_ok=True)
    try:
        rank = Rank(Settings(**options), mine, budget)
    except BaseException:
        barrier.abort()  # the other ranks stop waiting for this one
        raise
    barrier.wait()
    try:
        found = rank.run()
    finally:
        rank.tiers.clear()
    found["iolab"]["rank"] = index
    place = out / f"rank_{index}"
    place.mkdir(parents=True, exist_ok=True)
    runs.write_json(place / f"kvcache_results_{index}.json", found)


def run(directory: Path, out: Path, clients: int, options: dict[str, Any], option: int) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    refused = refusal(directory, clients, options)
    if refused:
        print(refused, file=sys.stderr)
        return 1
    runs.note_scratch(out, [directory])  # for `hostrun stop`, should the run not end as it should
    budget = room(directory) / clients
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(clients, timeout=600)
    procs = [context.Process(target=_rank, args=(k, directory, out, options, budget, barrier)) for k in range(clients)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    shutil.rmtree(directory, ignore_errors=True)
    runs.note_scratch(out, [])
    failed = [p.exitcode for p in procs if p.exitcode]
    summary = summarize(out, clients, "iolab", option)
    if failed:
        print(f"{len(failed)} of {clients} client(s) failed (exit {failed[0]})", file=sys.stderr)
    return 1 if failed or not summary["ranks"] else 0


# --- the run's summary: the ranks added up as MLPerf Storage's rules add them -----------------------------


def _rank_figures(index: int, document: dict[str, Any]) -> dict[str, Any]:
    """One rank's figures from its result file (kv-cache.py's shape): GiB/s, tokens/s, ms, GiB."""
    summary = document.get("summary") or {}
    cache = summary.get("cache_stats") or {}
    own = document.get("iolab") or {}
    latency = {
        f"{op}_device_ms": {p: cache.get(f"storage_{op}_device_{p}_ms") for p in ("p50", "p95", "p99")}
        for op in ("read", "write")
    }
    tiers = {
        tier: {op: cache.get(f"tier_{tier}_kv_bytes_{said}_gb", 0.0) for op, said in SAID.items()}
        for tier in ("gpu", "cpu", "storage")
    }
    return {
        "rank": index,
        "read_gibps": cache.get("tier_storage_read_bandwidth_gbps", 0.0),
        "write_gibps": cache.get("tier_storage_write_bandwidth_gbps", 0.0),
        "tokens_per_s": summary.get("avg_throughput_tokens_per_sec", 0.0),
        "storage_tokens_per_s": summary.get("storage_throughput_tokens_per_sec", 0.0),
        **latency,
        "tier_gib": tiers,
        "storage_entries": cache.get("storage_entries"),
        "requests": summary.get("total_requests", 0),
        "elapsed_s": summary.get("elapsed_time"),
        "errors": own.get("errors", 0),
        "fill_peak": own.get("fill_peak"),  # iolab's: the target's most share in use after a write
        "started_at": own.get("started_at"),
        "ended_at": own.get("ended_at"),
    }


def summarize(out: Path, ranks: int, tool: str, option: int) -> dict[str, Any]:
    """RUN_DIR/kvcache_run_summary.json from the ranks' result files (RUN_DIR/rank_<k>/kvcache_results_*.json):
    each rank's figures, and the option's as rule 6.3.4 makes them over the ranks of this trial (one run of
    iolab is one trial): read and write GiB/s and tokens/s summed, the device read and write P95 the most of
    the ranks', the ranks whose working set stayed in memory (no storage entry) listed, missing ranks too."""
    found, missing = [], []
    for index in range(ranks):
        files = sorted((out / f"rank_{index}").glob(RESULTS))
        try:
            found.append(_rank_figures(index, json.loads(files[-1].read_text())))
        except (IndexError, OSError, ValueError):
            missing.append(f"rank_{index}")

    def most(key: str) -> float | None:
        values = [r[key]["p95"] for r in found if r[key]["p95"] is not None]
        return max(values) if values else None

    aggregated = {
        "option": option,
        "aggregated_read_bandwidth_gbps": sum(r["read_gibps"] for r in found),
        "aggregated_write_bandwidth_gbps": sum(r["write_gibps"] for r in found),
        "aggregated_avg_throughput_tokens_per_sec": sum(r["tokens_per_s"] for r in found),
        "aggregated_storage_throughput_tokens_per_sec": sum(r["storage_tokens_per_s"] for r in found),
        "aggregated_device_read_p95_ms": most("read_device_ms"),
        "aggregated_device_write_p95_ms": most("write_device_ms"),
        "rank_count": ranks,
        "trial_count": 1,
        "partial_failure": bool(missing),
        "missing_files": missing,
        "cpu_tier_ranks": [r["rank"] for r in found if r["storage_entries"] == 0],
    }
    summary = {
        "schema_version": "1.0",
        "tool": tool,
        "written_at": time.time(),
        "total_ranks": ranks,
        "trials_per_option": 1,
        "options": {str(option): aggregated},
        "partial_failure": bool(missing),
        "ranks": found,
    }
    runs.write_json(out / SUMMARY, summary)
    return summary


def prepare_run(
    host: str,
    run_dir: Path,
    work: Path,
    clients: int,
    options: dict[str, Any],
    pause: float,
    drop: bool,
    refused: Callable[[Path, int, dict[str, Any]], str | None] | None = None,
    key: str = "",
) -> int:
    """A run's prepare: the room in `work` and the host's memory for its `clients` (`refused`: refusal, or the
    reference's), on its first host mpirun's `key` (the reference's), the `pause` between options, then the run
    directory and the drop (`drop`). Nothing but the work directory is made before every check passed."""
    work.mkdir(parents=True, exist_ok=True)  # the room is read on the target's file system
    said = (refused or refusal)(work, clients, options) or prepare.no_key(host, key, "bench_mlperf_kvcache_ssh_key")
    if said:
        print(said, file=sys.stderr)
        return 1
    time.sleep(max(pause, 0.0))
    return prepare.ready(time.time(), run_dir, drop)  # the call's start, for the lead: after the pause


def prepare_options(parser: argparse.ArgumentParser) -> None:
    """The prepare's options, here and in host_reference's."""
    parser.add_argument("--host", default="", help="prepare: this host's inventory name")
    parser.add_argument("--run-dir", type=Path, help="prepare: the run's directory on this host")
    parser.add_argument("--pause", type=float, default=0.0, help="prepare: seconds idle once the checks pass")
    parser.add_argument("--drop-caches", action="store_true", help="prepare: then sync and drop the caches")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iolab.kinds.kvcache.host", description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=("prepare", "check", "run"))
    prepare_options(parser)
    parser.add_argument("--dir", type=Path, required=True, help="the work directory on the storage under test")
    parser.add_argument("--out", type=Path, help="run: the run's directory (results and summary)")
    parser.add_argument("--clients", type=int, default=1, help="ranks on this host")
    parser.add_argument("--options", type=json.loads, required=True, help="the simulation's settings (JSON)")
    parser.add_argument("--option", type=int, default=0, help="MLPerf Storage's option number, 0 for none")
    opts = parser.parse_args(argv)
    if opts.clients < 1:
        parser.error("--clients is at least 1")
    if opts.phase == "prepare":
        if opts.run_dir is None:
            parser.error("prepare needs --run-dir RUN_DIR")
        return prepare_run(opts.host, opts.run_dir, opts.dir, opts.clients, opts.options, opts.pause, opts.drop_caches)
    if opts.phase == "check":
        opts.dir.mkdir(parents=True, exist_ok=True)
        refused = refusal(opts.dir, opts.clients, opts.options)
        print(refused or f"{opts.clients} client(s) fit this host's memory and the target's room", file=sys.stderr)
        return 1 if refused else 0
    if opts.out is None:
        parser.error("run needs --out RUN_DIR")
    opts.out.mkdir(parents=True, exist_ok=True)
    try:
        return run(opts.dir, opts.out, opts.clients, opts.options, opts.option)
    except OSError as exc:
        print(f"kvcache on {opts.dir}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
