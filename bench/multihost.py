"""Fan-out cost on simulated hosts (issue 3): one fio job on 4 hosts against 1.

Targets: wall time on 4 hosts / on 1 host ≤ 1.2; orchestration overhead per
run on 4 hosts (wall − runtime − ramp) ≤ 4 s; start skew across hosts ≤ 100 ms.
Brings up 4 simulated hosts (`lab.sim-up`) unless they are up, and takes them
down again if it brought them up.

    .venv/bin/python bench/multihost.py [--rounds 3] [--runtime 4] [--ramp 1]
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _common import ROOT, job_args, lab, samples, spread, write_campaign

INVENTORY = ROOT / "inventory" / "sim.yml"


def main() -> None:
    opts = job_args(__doc__)
    results = Path(tempfile.mkdtemp(prefix="iolab-bench-"))
    brought_up = not INVENTORY.exists()
    lab("lab.sim-up", "--count", "4", results=results)
    campaign = write_campaign(
        {
            "name": "bench-multihost",
            "backends": [{"name": "bench-multihost", "type": "tmpfs", "size": "512MiB"}],
            "workloads": [{"name": "w", "type": "fio", "profile": "seq-read-1m"}],
        }
    )
    common = ["--inventory", str(INVENTORY), "--campaign", str(campaign), "--backend", "bench-multihost"]
    lab("storage.mount", *common, "--hosts", "gpu[01-04]", results=results)
    try:
        walls: dict[int, list[float]] = {1: [], 4: []}
        spreads = []
        for _ in range(opts.rounds):
            for count, pattern in ((1, "gpu01"), (4, "gpu[01-04]")):
                wall, _ = lab(
                    "bench.fio",
                    *common,
                    "--hosts",
                    pattern,
                    "--profile",
                    "seq-read-1m",
                    "--runtime",
                    f"{opts.runtime:g}s",
                    "--ramp",
                    f"{opts.ramp:g}s",
                    "--size",
                    "256MiB",
                    results=results,
                )
                walls[count].append(wall)
                if count == 4:
                    agg = [
                        s
                        for s in samples(results, "fio-bench-multihost")
                        if s["host"] == "*" and s["metric"] == "read_bw"
                    ][-1]
                    spreads.append(agg["metadata"]["start_spread_s"] * 1000)
        ratio = [b / a for a, b in zip(walls[1], walls[4], strict=False)]
        job = opts.runtime + opts.ramp
        print(f"fio seq-read-1m, {opts.runtime:g} s + {opts.ramp:g} s ramp, per-host tmpfs, {opts.rounds} rounds")
        print(f"  wall on 1 host:  {spread(walls[1])} s")
        print(f"  wall on 4 hosts: {spread(walls[4])} s")
        print(f"  ratio 4 hosts / 1 host: {spread(ratio)}   target ≤ 1.2")
        print(f"  orchestration overhead per run on 4 hosts: {spread([w - job for w in walls[4]])} s   target ≤ 4 s")
        print(f"  start spread across the 4 hosts: {spread(spreads)} ms   target ≤ 100 ms")
    finally:
        lab("storage.unmount", *common, "--hosts", "gpu[01-04]", results=results)
        if brought_up:
            lab("lab.sim-down", results=results)


if __name__ == "__main__":
    main()
