"""The campaign loop's own cost: a fio-only campaign on localhost, Σ(runtime + ramp) / wall time.

    .venv/bin/python bench/run_loop.py [--rounds 3] [--inventory inventory/local.yml] [--hosts gpu01]
    .venv/bin/python bench/run_loop.py --six --inventory inventory/sim.yml --hosts 'gpu[01-04]'

The campaign is the quick campaign's fio part as issue 16 states its target: two backends
(tmpfs, local disk), three fio profiles, three repetitions: 18 runs of 5 s + 1 s ramp, 108 s of
fio. Everything else in the wall time (Ansible, mounting, dropping caches, starting together,
bringing the results back, storing them) is the harness. A first, unmeasured call sets the
hosts up. Prints each round's wall time and efficiency, then the median. `--six`: the 6-run
campaign of issue 16's fan-out target (tmpfs only, two repetitions), to compare 1 host with 4.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import yaml
from _common import lab, samples

RUNTIME, RAMP, REPETITIONS = 5, 1, 3
PROFILES = ["seq-read-1m", "rand-read-16k", "imagenet-bssplit"]


def campaign(directory: Path, six: bool) -> Path:
    backends = [
        {"name": "bench-loop-mem", "type": "tmpfs", "size": "1GiB"},
        {"name": "bench-loop-disk", "type": "local", "path": "/var/tmp"},
    ]
    data = {
        "name": "bench-run-loop",
        "repetitions": 2 if six else REPETITIONS,
        "backends": backends[:1] if six else backends,
        "workloads": [
            {"name": p, "type": "fio", "profile": p, "runtime": f"{RUNTIME}s", "ramp": f"{RAMP}s", "size": "512MiB"}
            for p in PROFILES
        ],
    }
    path = directory / "campaign.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--inventory", default="inventory/local.yml")
    parser.add_argument("--hosts", default="")
    parser.add_argument("--six", action="store_true", help="6 runs on one tmpfs backend")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iolab-bench-loop-"))
    path = campaign(work, opts.six)
    where = ["--inventory", opts.inventory] + (["--hosts", opts.hosts] if opts.hosts else [])
    measured = (1 if opts.six else 2) * len(PROFILES) * (2 if opts.six else REPETITIONS) * (RUNTIME + RAMP)
    lab("lab.setup", *where, results=work / "setup")
    efficiencies = []
    for number in range(1, opts.rounds + 1):
        results = work / f"round-{number}"
        wall, _ = lab("bench.all", "--campaign", str(path), *where, results=results)
        runs = {s["run_id"] for s in samples(results, "bench-run-loop")}
        efficiencies.append(measured / wall)
        print(
            f"round {number}: {len(runs)} runs, {measured} s of fio in {wall:.1f} s wall: "
            f"efficiency {measured / wall:.3f}, harness {(wall - measured) / len(runs):.2f} s per run",
            flush=True,
        )
    print(
        f"efficiency median {statistics.median(efficiencies):.3f} "
        f"(min {min(efficiencies):.3f}, max {max(efficiencies):.3f}, n={len(efficiencies)}); target ≥ 0.80"
    )


if __name__ == "__main__":
    main()
