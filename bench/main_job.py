"""The main job on the embedded default: `bench.all` of campaigns/quick.yml, K times in a row.

Each round starts from fresh results, so every search probes anew. Per round: the wall time, then per
backend the answer with its interval and what limited it, and each probed point's AU over its probes
(spread = highest − lowest). Targets: the round within 600 s on this 2-core machine, fio baselines
included; every backend's answer within 1 of the other rounds'.

    .venv/bin/python bench/main_job.py --times 5                       the figures of docs/PERFORMANCE.md
    .venv/bin/python bench/main_job.py --times 1 --campaign tiny.yml   a check of the script itself
    .venv/bin/python bench/main_job.py --backend local --hog           local's search beside one busy core

`--backend NAME` keeps only that backend's accelerator search (no fio baselines); `--hog` runs a busy
loop (one core, a process of this script's, ended by its PID) for each round's whole duration: the
search must run its disturbed probes again and land within 1 of the quiet answer, or flag the answer.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from _common import lab, write_campaign

from iolab import paths
from iolab.measures import limits
from iolab.measures.samples import AGGREGATE_HOST, ResultStore
from iolab.report import tables as report


def round_lines(results: Path, campaign: str) -> list[str]:
    """Each backend's answer, its limiter and every point's AU over its probes."""
    lines = []
    for s in ResultStore(results, campaign).samples():
        if s.metric != report.VERDICT_METRIC or s.host != AGGREGATE_HOST:
            continue
        meta = s.metadata
        limit = meta.get("limited_by")
        lines.append(
            f"  {s.backend}: {report.fed_label(s.value, meta, s.params.get('accelerator_type', ''))}; "
            + (limits.said(limit) if limit else "what limited it was not recorded")
        )
        lines += [
            f"    {p['accelerators']:>3} per host: {p['probes']} probe(s), AU {min(p['au']):.1f}–{max(p['au']):.1f} % "
            f"(spread {p['au_spread']:.1f} points){', held' if p['held'] else ''}"
            + (f", {p['disturbed']} disturbed run(s) again" if p["disturbed"] else "")
            for p in meta.get("points", [])
        ]
    return lines


def search_only(campaign: Path, backend: str) -> Path:
    """The campaign with only `backend` and its accelerator search."""
    data = yaml.safe_load(campaign.read_text())
    data["backends"] = [b for b in data["backends"] if b["name"] == backend]
    data["workloads"] = [w for w in data["workloads"] if w.get("search") == "accelerators"]
    if not data["backends"] or not data["workloads"]:
        sys.exit(f"{campaign} has no backend {backend!r} or no accelerator search")
    return write_campaign(data)


@contextlib.contextmanager
def busy_core(on: bool):
    """One core kept busy by a process of ours for the block's duration, ended by its PID."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if on else None
    try:
        yield
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=1, help="rounds in a row (default 1; the figures: 5)")
    parser.add_argument("--campaign", help="a campaign file (default: the embedded campaigns/quick.yml)")
    parser.add_argument("--backend", help="only this backend's accelerator search")
    parser.add_argument("--hog", action="store_true", help="beside one busy core for each round's duration")
    args = parser.parse_args()
    campaign = Path(args.campaign) if args.campaign else paths.DEFAULT_CAMPAIGN
    if args.backend:
        campaign = search_only(campaign, args.backend)
    for number in range(1, args.times + 1):
        results = Path(tempfile.mkdtemp(prefix="iolab-bench-"))
        with busy_core(args.hog):
            wall, done = lab("bench.all", "--campaign", str(campaign), results=results)
        name = next(p.name for p in results.iterdir() if (p / "samples.jsonl").exists())
        runs = {s.run_id for s in ResultStore(results, name).samples()}
        print(f"round {number}/{args.times}: bench.all of {name}: {wall:.0f} s for {len(runs)} runs   target ≤ 600 s")
        print("\n".join(round_lines(results, name)), flush=True)


if __name__ == "__main__":
    main()
