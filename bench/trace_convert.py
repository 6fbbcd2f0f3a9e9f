"""How long a trace of N I/Os takes to convert from strace's log, write, and check (issue 45: 1,000,000 in under 10 s).

    .venv/bin/python bench/trace_convert.py [--ios 1000000] [--dir /tmp/iolab-trace-bench]

The log is made here in strace's own format (`strace -f -ttt -T -y -s 0`): 8 processes reading
files of 10,000 under one root, each file opened, read in 64 KiB calls (some unfinished and
resumed, as -f writes them when processes interleave), closed. Prints each step's seconds; with
--stage DIR it also stages the trace's files there (each file's extent: 2,000 files of 192 KiB).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pyfiles"))

from iolab.host.trace import stage  # noqa: E402
from iolab.shared import trace, trace_strace  # noqa: E402

ROOT = "/data/train"


def strace_log(ios: int) -> list[str]:
    """A log of about `ios` traced calls (opens, reads, closes) of 8 processes, every 20th call split in two."""
    lines, clock, number = [], 1_700_000_000_000_000, 0
    while number < ios:
        pid, name = 1000 + number % 8, f"{ROOT}/n{number % 1000:03d}/{number % 10_000:05d}.jpg"
        calls = [f'openat(AT_FDCWD</data>, "{name}", O_RDONLY) = 5<{name}>']
        calls += [f'read(5<{name}>, ""..., 65536) = 65536'] * 3 + [f"close(5<{name}>) = 0"]
        for call in calls:
            clock += 7
            stamp = f"{pid} {clock // 1_000_000}.{clock % 1_000_000:06d}"
            if number % 20 == 0:
                head, _, tail = call.partition(", ")
                lines.append(f"{stamp} {head}, <unfinished ...>")
                lines.append(f"{stamp} <... {head.split('(')[0]} resumed>{tail} <0.000011>")
            else:
                lines.append(f"{stamp} {call} <0.000011>")
            number += 1
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ios", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/iolab-trace-bench"))
    parser.add_argument("--stage", type=Path, help="also stage the trace's files in this directory (iolab.host.trace)")
    args = parser.parse_args()
    lines = strace_log(args.ios)
    text, steps = "\n".join(lines), []
    clock = (time.perf_counter(), time.process_time())

    def step(name: str) -> None:
        nonlocal clock
        now = (time.perf_counter(), time.process_time())
        steps.append(f"{name} {now[0] - clock[0]:.2f} s ({now[1] - clock[1]:.2f} s CPU)")
        clock = now

    began = clock
    header, records = trace_strace.convert(text, ROOT)
    step("converted")
    path = trace.write(args.dir, {**header, "tracer": "strace (synthetic log)"}, records)
    step("written")
    loaded = trace.load(path)
    step("checked")
    if args.stage:
        done = stage(loaded, args.stage, 1)
        step(f"staged ({done['bytes']:,} B in {len(loaded.files):,} files)")
    total = f"total {clock[0] - began[0]:.2f} s ({clock[1] - began[1]:.2f} s CPU)"
    print(
        f"{len(lines):,} strace lines → {loaded.records:,} records, {len(loaded.files):,} files: {', '.join(steps)}, "
        f"{total}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs ({path})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
