"""Where one `./lab bench.all` command's wall goes on localhost, from inside it, per phase (issue 42):

    .venv/bin/python bench/harness_phases.py [--rounds 2] [--name fanlocal] [--kind fio|pytorch|tensorflow] [--local]

The command is bench/harness_cost.py's (a): one fio run of 2 s + 1 s ramp on a 256 MiB tmpfs (--kind pytorch or
tensorflow: one loader run over a 256-file data set the command makes), the hosts set up by a first, unmeasured
call, each call into a fresh results directory. bench/phase_probe/sitecustomize.py, on
PYTHONPATH, times the command's own steps from inside it: start-up and imports, the campaign's load and checks, the
lease, the release, each ansible-playbook process (its start-up before its first event, each task until the next
one starts, its end), the steps and the run over the fan-out, the store. Prints, per round, the wall, the load
average before it, and a timeline: offset from the command's start and length, in s.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from _common import ROOT
from harness_cost import LOADERS, bench_all, campaign, loader_campaign

PROBE = ROOT / "bench" / "phase_probe"


def timeline(lines: list[dict], wall: float) -> list[str]:
    """The probe's spans from the command's start (its first span's), an ansible-playbook's tasks under it."""
    spans = sorted((line for line in lines if "span" in line), key=lambda line: line["start"])
    events = [line for line in lines if "event" in line]
    t0 = spans[0]["start"]
    out, last = [], t0
    for span in spans:
        if span["start"] >= last + 0.05:
            out.append(f"  {last - t0:6.2f} {span['start'] - last:6.2f} s  (between the steps above and below)")
        out.append(f"  {span['start'] - t0:6.2f} {span['end'] - span['start']:6.2f} s  {span['span']}")
        if span["span"].startswith("ansible-playbook"):
            out += _tasks([e for e in events if span["start"] <= e["at"] <= span["end"]], span, t0)
        last = max(last, span["end"])
    out.append(f"  {last - t0:6.2f} {t0 + wall - last:6.2f} s  (after the last step: report, exit)")
    return out


def _tasks(events: list[dict], span: dict, t0: float) -> list[str]:
    """An ansible-playbook's start-up, its tasks (each until the next one starts), and its end."""
    if not events:
        return []
    starts = [e for e in events if e["event"] in ("playbook_on_task_start", "playbook_on_stats")]
    out = [f"  {span['start'] - t0:6.2f} {events[0]['at'] - span['start']:6.2f} s      ansible-playbook's start-up"]
    for task, following in zip(starts, starts[1:], strict=False):
        out.append(f"  {task['at'] - t0:6.2f} {following['at'] - task['at']:6.2f} s      task: {task['task']}")
    end = starts[-1]["at"] if starts else events[-1]["at"]
    out.append(f"  {end - t0:6.2f} {span['end'] - end:6.2f} s      its end (stats, exit, runner)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--name", default="fanlocal", help="campaign name, and the tmpfs /mnt/iolab/NAME-mem")
    parser.add_argument("--kind", choices=["fio", *LOADERS], default="fio", help="the run's kind (harness_cost's (a))")
    parser.add_argument("--local", action="store_true", help="a loader's run on a local backend (harness_cost's)")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="harness-phases-"))
    local = work / "local" if opts.local else None
    if local:
        local.mkdir()
    one = campaign(work, opts.name, 1) if opts.kind == "fio" else loader_campaign(work, opts.name, opts.kind, 1, local)
    bench_all(one, work / "setup")  # sets the hosts up (this release), unmeasured
    for round_ in range(1, opts.rounds + 1):
        steps = work / f"phases-{round_}.jsonl"
        # The probe, and this checkout's iolab (before the virtualenv's): bench_all passes the environment on.
        os.environ.update(PYTHONPATH=os.pathsep.join(map(str, (PROBE, ROOT / "pyfiles"))), IOLAB_PHASES_OUT=str(steps))
        load = os.getloadavg()[0]
        wall = bench_all(one, work / f"p{round_}")
        lines = [json.loads(line) for line in steps.read_text().splitlines()]
        # A call refused (localhost held by another command) wrote its start-up too: the last call's lines only.
        first = max(i for i, line in enumerate(lines) if line.get("span", "").startswith("start-up"))
        print(f"round {round_}, 1 run: {wall:.2f} s wall, load {load:.2f} before; offset and length:", flush=True)
        print("\n".join(timeline(lines[first:], wall)), flush=True)
        del os.environ["IOLAB_PHASES_OUT"]


if __name__ == "__main__":
    main()
