"""The main job on the embedded default (issue 2): `bench.all` of campaigns/quick.yml, target ≤ 5 min.

.venv/bin/python bench/main_job.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _common import lab, samples


def main() -> None:
    results = Path(tempfile.mkdtemp(prefix="iolab-bench-"))
    wall, done = lab("bench.all", results=results)
    stored = samples(results, "quick")
    runs = {s["run_id"] for s in stored}
    print(
        f"bench.all on the embedded default (campaigns/quick.yml, localhost): {wall:.0f} s "
        f"for {len(runs)} runs, {len(stored)} samples   target ≤ 300 s"
    )


if __name__ == "__main__":
    main()
