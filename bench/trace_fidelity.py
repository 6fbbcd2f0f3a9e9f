"""A trace's fidelity: the pil loader captured on this machine's disk, then replayed on that disk (issue 45).

    .venv/bin/python bench/trace_fidelity.py [--files 1200] [--dir /var/tmp/iolab-trace-fidelity] [--repetitions 2]

1. an ImageNet-like data set of --files JPEGs (iolab.host.dataset gen) in --dir/ds;
2. `./lab trace.capture --root DIR/ds --baseline -- python -m iolab.kinds.pytorch.host --reader pil ...`
   (1 rank, 2 workers, batches of 32, 20 ms of emulated compute per batch): the loader once untraced,
   once under strace, caches dropped before each; its images/s both ways from each run's loader.json;
3. a campaign replaying the trace on a local backend in DIR/disk (the same file system; a 1 GiB tmpfs
   backend where DIR is under /dev/shm), at recorded timing and as fast as possible, --repetitions times each.

Prints the capture's cost, and per repetition: bytes replayed against the trace's, the replay's duration
against the trace's span (recorded timing) and its rate against the loader's (fast).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, drop_caches, lab, loader_argv, samples, write_campaign

from iolab.kinds.pytorch import parser as pytorch
from iolab.shared import trace


def _waiting(*args: str, results: Path) -> subprocess.CompletedProcess:
    """A lab task, waiting (up to 30 min) while another campaign holds this machine's lease."""
    for _ in range(360):
        _, done = lab(*args, results=results, check=False)
        if "is held by campaign" not in done.stderr:
            if done.returncode != 0:
                sys.exit(f"{args[0]} failed ({done.returncode}):\n{done.stderr}")
            return done
        time.sleep(5)
    sys.exit(f"{args[0]}: this machine's lease stayed held for 30 min")


def _capture(work: Path, results: Path) -> tuple[trace.Trace, dict]:
    """The loader's trace, and its images/s untraced (a run of its own) and traced (the capture's run)."""
    argv = ["--reader", "pil", "--workers", "2", "--batch-size", "32", "--accelerator", "emulated"]
    argv += ["--compute-per-batch", "0.02", "--accelerators", "1"]
    drop_caches()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")}
    subprocess.run([*loader_argv(work / "ds", work / "untraced"), *argv], check=True, capture_output=True, env=env)
    flags = ["--root", str(work / "ds"), "--timeout", "900", "--baseline", "--"]
    done = _waiting("trace.capture", *flags, *loader_argv(work / "ds", work / "traced"), *argv, results=results)
    found = trace.load(done.stdout.strip().splitlines()[-1].split(": ", 1)[1])
    rates = {
        name: next(m.value for m in pytorch.parse(work / name).measurements if m.metric == "samples_per_s")
        for name in ("untraced", "traced")
    }
    return found, {"images_per_s": rates, "wall_s": found.header["capture"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1200)
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/iolab-trace-fidelity"))
    parser.add_argument("--repetitions", type=int, default=2)
    args = parser.parse_args()
    work, results = args.dir, Path(tempfile.mkdtemp(prefix="iolab-fidelity-"))
    gen = [sys.executable, "-m", "iolab.host.dataset", "gen", str(work / "ds"), "--files", str(args.files)]
    subprocess.run([*gen, "--seed", "1", "--classes", "20"], check=True, env={"PYTHONPATH": str(ROOT / "pyfiles")})
    found, cost = _capture(work, results)
    print(
        f"trace {found.path.name}: {found.records:,} I/Os, {len(found.files):,} files, {found.bytes['read']:,} B read,"
    )
    print(f"  span {found.span_us / 1e6:.3f} s, {len(found.processes)} processes; capture cost: {json.dumps(cost)}")
    on_tmpfs = str(work).startswith("/dev/shm/")  # iolab mounts no backend under /dev: a tmpfs of its own then
    workloads = [{"name": "recorded", "type": "replay", "trace": str(found.path)}]
    workloads.append({"name": "fast", "type": "replay", "trace": str(found.path), "timing": "fast"})
    backend = {"name": "fidelity-tmpfs", "type": "tmpfs", "size": "1GiB"} if on_tmpfs else {}
    if not on_tmpfs:
        (work / "disk").mkdir(exist_ok=True)
        backend = {"name": "fidelity-disk", "type": "local", "path": str(work / "disk")}
    name = "trace-fidelity"
    campaign = {"name": name, "repetitions": args.repetitions, "backends": [backend], "workloads": workloads}
    _waiting("bench.all", "--campaign", str(write_campaign(campaign)), results=results)
    loader_rate = found.bytes["read"] / (found.span_us / 1e6)
    for s in samples(results, name):
        if s["host"] == "localhost" and s["metric"] in ("replay_s", "replay_bw"):
            same = s["metadata"]["replay_bytes"] == found.bytes
            if s["metric"] == "replay_s":
                against = f"{s['value'] / (found.span_us / 1e6) - 1:+.1%} of the trace's span"
            else:
                against = f"{s['value'] / loader_rate:.3g} × the loader's read rate"
            print(
                f"  {s['workload']} rep {s['repetition']}: {s['metric']} {s['value']:.4g} ({against}); "
                f"bytes {'the same' if same else 'DIFFER'}"
            )
    shutil.rmtree(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
