"""Does a campaign's `search: accelerators` agree with `bench.accelerators`?

    .venv/bin/python bench/fed_agreement.py [--rounds 3] [--backend local]

Alternates, each round with fresh results (no probe reused): the quick campaign's
resnet50-h100 workload alone as a campaign, and `bench.accelerators` with the same
settings on the same backend and data set. Prints each side's answer and AU per
accelerator count probed, then the largest AU difference at a count both probed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _common import ROOT, lab, samples, write_campaign


def waiting(*args: str, results: Path) -> tuple[float, str]:
    """Run a task, waiting while another command holds localhost's lease; (wall seconds, its output)."""
    while True:
        wall, done = lab(*args, results=results, check=False)
        if done.returncode == 0:
            return wall, done.stdout + done.stderr
        if "is held by" not in done.stderr:
            sys.exit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        time.sleep(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="alternations (default 3)")
    parser.add_argument("--backend", default="local", help="a backend of campaigns/quick.yml (default local)")
    args = parser.parse_args()
    quick = yaml.safe_load((ROOT / "campaigns" / "quick.yml").read_text())
    workload = next(w for w in quick["workloads"] if w.get("search") == "accelerators")
    backend = next(b for b in quick["backends"] if b["name"] == args.backend)
    spec = write_campaign({"name": "fed", "backends": [backend], "dataset": quick["dataset"], "workloads": [workload]})
    flags = [
        "--backend",
        args.backend,
        "--campaign",
        str(spec),
        "--type",
        workload["accelerator"]["type"],
        "--reader",
        workload["reader"],
        "--workers",
        str(workload["workers"]),
        "--batch-size",
        str(workload["batch_size"]),
        "--max",
        str(workload["accelerators"]),
        # steps large enough that each rank reads its whole share, as the campaign's run does
        "--steps",
        str(quick["dataset"]["files"] // workload["batch_size"]),
    ]
    if not workload.get("decode", True):
        flags.append("--no-decode")
    differences = []
    for round_ in range(1, args.rounds + 1):
        results = Path(tempfile.mkdtemp(prefix="iolab-fed-"))
        wall_c, _ = waiting("bench.all", "--campaign", str(spec), results=results)
        wall_s, out = waiting("bench.accelerators", *flags, results=results)
        answer = next(line for line in out.splitlines() if line.startswith("answer:"))
        stored = samples(results, "fed")
        fed = next(s for s in stored if s["metric"] == "accelerators_fed" and s["host"] == "*")
        campaign = {p["accelerators"]: p["au"] for p in fed["metadata"]["probes"]}
        standalone = {
            s["params"]["accelerators"]: s["value"]
            for s in samples(results, f"accelerators-{args.backend}-{workload['accelerator']['type']}")
            if s["metric"] == "au" and s["host"] != "*"
        }
        both = sorted(set(campaign) & set(standalone))
        differences += [abs(campaign[n] - standalone[n]) for n in both]
        print(
            f"round {round_}: campaign {int(fed['value'])} fed ({wall_c:.0f} s), AU "
            + ", ".join(f"{n}: {au:.1f}" for n, au in sorted(campaign.items()))
            + f" · bench.accelerators ({wall_s:.0f} s), AU "
            + ", ".join(f"{n}: {au:.1f}" for n, au in sorted(standalone.items()))
            + f" · {answer}"
        )
    print(
        f"largest AU difference at a count both probed: {max(differences):.1f} points "
        f"({len(differences)} pairs over {args.rounds} rounds)"
    )


if __name__ == "__main__":
    main()
