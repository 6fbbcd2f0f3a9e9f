"""Fidelity and overhead of `invoke bench.fio` on localhost.

Fidelity: the same fio job through `invoke bench.fio` and by hand on the same
tmpfs, alternated (ABBA: every other round by hand first, with the job file of the
round before); iolab's throughput / hand-run throughput should lie in
0.97–1.03. Overhead: wall time of `invoke bench.fio` minus the job's runtime
and ramp, target ≤ 3 s.

    .venv/bin/python bench/fidelity.py [--rounds 3] [--runtime 4] [--ramp 1]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from _common import drop_caches, job_args, lab, samples, spread, write_campaign

MOUNT = "/mnt/iolab/bench-fidelity"
SIZE = 512 << 20


def by_hand(job: Path) -> float:
    drop_caches()
    done = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, check=True)
    doc = json.loads(done.stdout[done.stdout.index("{") :])
    return sum(j["read"]["bw_bytes"] for j in doc["jobs"])


def main() -> None:
    opts = job_args(__doc__)
    results = Path(tempfile.mkdtemp(prefix="iolab-bench-"))
    campaign = write_campaign(
        {
            "name": "bench-fidelity",
            "backends": [{"name": "bench-fidelity", "type": "tmpfs", "size": "1GiB", "mountpoint": MOUNT}],
            "workloads": [{"name": "w", "type": "fio", "profile": "seq-read-1m"}],
        }
    )
    flags = ["--campaign", str(campaign), "--backend", "bench-fidelity"]
    lab("storage.mount", *flags, results=results)
    try:
        iolab_bw, hand_bw, walls = [], [], []
        job = results / "hand.fio"  # the job file of the round before, in a round by hand first
        for round_ in range(opts.rounds):
            if round_ % 2:  # ABBA: every other round runs by hand first, so that neither side always runs second
                hand_bw.append(by_hand(job))
            wall, _ = lab(
                "bench.fio",
                *flags,
                "--profile",
                "seq-read-1m",
                "--runtime",
                f"{opts.runtime:g}s",
                "--ramp",
                f"{opts.ramp:g}s",
                "--size",
                f"{SIZE}",
                results=results,
            )
            last = [
                s
                for s in samples(results, "fio-bench-fidelity")
                if s["metric"] == "read_bw" and s["host"] == "localhost"
            ][-1]
            walls.append(wall)
            iolab_bw.append(last["value"])
            raw = results / "fio-bench-fidelity" / "raw" / last["run_id"] / "localhost" / "job.fio"
            # The very job file iolab ran, minus its logs: same file, size, options.
            job.write_text(
                "".join(
                    line + "\n"
                    for line in raw.read_text().splitlines()
                    if not line.startswith(("write_bw_log", "log_avg_msec"))
                )
            )
            if not round_ % 2:
                hand_bw.append(by_hand(job))
        ratios = [a / b for a, b in zip(iolab_bw, hand_bw, strict=False)]
        overhead = [w - opts.runtime - opts.ramp for w in walls]
        print(
            f"fio seq-read-1m on a 1 GiB tmpfs, {opts.runtime:g} s + {opts.ramp:g} s ramp, "
            f"{opts.rounds} rounds alternated"
        )
        print(f"  through iolab: {[f'{v / 2**30:.2f}' for v in iolab_bw]} GiB/s")
        print(f"  by hand:       {[f'{v / 2**30:.2f}' for v in hand_bw]} GiB/s")
        print(f"  fidelity (iolab / hand): {spread(ratios)}   target 0.97–1.03")
        print(f"  overhead of bench.fio (wall − runtime − ramp): {spread(overhead)} s   target ≤ 3 s")
        print(f"  median ratio {statistics.median(ratios):.3f}")
    finally:
        lab("storage.unmount", *flags, results=results)


if __name__ == "__main__":
    main()
