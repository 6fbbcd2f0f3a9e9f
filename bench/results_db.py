"""The results index at 100,000 samples: indexing them, and report.history over them (the target: each ≤ 5 s).

    .venv/bin/python bench/results_db.py [--samples 100000] [--campaigns 10] [--rounds 2]

The samples are real ones: the fio samples of tests/fixtures/report/fio-tmpfs (host samples with their
full provenance, ≈1.7 KB a line, and the aggregates), copied over `--campaigns` stores a month apart,
three backends, each run id and value its own, written as a campaign writes them (whole lines, one
store's files). Then, each round on a fresh index:

- index: `./lab results.index --rebuild`'s work, in process: every store's lines read and inserted
  (iolab.results.db.caught_up), timed alone (wall and CPU seconds: on a shared machine the CPU time is
  what the work costs, the wall time what the machine's load made of it); and the command end to end
  (Python's start, imports, the catch-up that finds nothing, the proof that reads every file again),
  for what a person waits;
- history: `./lab report.history --format json`'s work (iolab.report.history_series.run), in process, and the
  command end to end (`report.history`: the campaign table and the series table).

Prints the load average before and after: the machine is shared, figures under load are slower.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import ROOT, lab

FIXTURE = ROOT / "tests" / "fixtures" / "report" / "fio-tmpfs" / "samples.jsonl"


def make(results: Path, total: int, stores: int) -> int:
    """`total` samples over `stores` stores: the fixture's lines with their own run ids, values, backends, months."""
    lines = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    per_store = total // stores
    written = 0
    for c in range(stores):
        name = f"bench-history.{c:02d}" if c < stores - 1 else "bench-history"
        store = results / name
        store.mkdir(parents=True)
        month = f"2026-{1 + c % 12:02d}-{1 + c // 12:02d}"
        out = []
        for i in range(per_store):
            d = dict(lines[i % len(lines)])
            run = i // len(lines)
            d["campaign"] = "bench-history"
            d["run_id"] = f"{c:02d}{run:010d}"
            d["backend"] = ("vendor-a", "vendor-b", "vendor-c")[run % 3]
            d["repetition"] = 1 + run // 3 % 5
            d["value"] = d["value"] * (1 + 0.001 * (i % 17))
            d["started_at"] = month + d["started_at"][10:]
            d["ended_at"] = month + d["ended_at"][10:]
            out.append(json.dumps(d, sort_keys=True, separators=(",", ":")))
        (store / "samples.jsonl").write_text("\n".join(out) + "\n")
        runs = {(d["run_id"], d["host"]) for d in map(json.loads, out) if d["host"] != "*"}
        records = [json.dumps({"run_id": r, "host": h, "status": "ok", "error": None}) for r, h in sorted(runs)]
        (store / "runs.jsonl").write_text("\n".join(records) + "\n")
        written += len(out)
    return written


def timed(action, cpu: list[float]) -> float:
    """Wall seconds of `action`; its CPU seconds (this process's) appended to `cpu`."""
    started, used = time.perf_counter(), time.process_time()
    action()
    cpu.append(time.process_time() - used)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--campaigns", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    from iolab.report import history_series
    from iolab.results import db as results_db

    base = Path(tempfile.mkdtemp(prefix="iolab-bench-history-"))
    try:
        results = base / "results"
        count = make(results, args.samples, args.campaigns)
        size = sum(p.stat().st_size for p in results.rglob("*.jsonl"))
        print(f"{count:,} samples in {args.campaigns} stores, {size / 1e6:.0f} MB of JSONL")
        print(f"load average before: {' '.join(open('/proc/loadavg').read().split()[:3])}")
        figures: dict[str, list[float]] = {"index": [], "index command": [], "history": [], "history command": []}
        cpu: dict[str, list[float]] = {"index": [], "history": []}
        for number in range(1, args.rounds + 1):
            for name in os.listdir(results):
                if name.startswith(results_db.FILE):
                    os.remove(results / name)
            results_db.engine.cache_clear()
            figures["index"].append(timed(lambda: results_db.caught_up(results), cpu["index"]))
            figures["index command"].append(lab("results.index", "--rebuild", results=results)[0])
            figures["history"].append(
                timed(lambda: history_series.run(results, [], None, None, [], None), cpu["history"])
            )
            figures["history command"].append(lab("report.history", results=results)[0])
            print(
                f"round {number}: "
                + ", ".join(
                    f"{k} {v[-1]:.2f} s" + (f" ({cpu[k][-1]:.2f} s CPU)" if k in cpu else "")
                    for k, v in figures.items()
                )
            )
        print(f"index on disk: {sum(p.stat().st_size for p in results.glob(results_db.FILE + '*')) / 1e6:.0f} MB")
        print("median: " + ", ".join(f"{k} {statistics.median(v):.2f} s" for k, v in figures.items()))
        print(f"load average after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
