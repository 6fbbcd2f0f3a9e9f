"""TFRecord writing speed: N records of 114,660 B (an average ImageNet JPEG) framed with CRC-32C.

    .venv/bin/python bench/tfrecord_crc.py [--records 2000] [--runs 3] [--fallback]

Writes the records with `iolab.host.dataset.tfrecord.write` into a fresh directory on the
data set's usual scratch space (/var/tmp) and prints MB/s (10^6 bytes) per run and
their median. What it measures is the framing: encoding the Example and two masked
CRC-32C per record, then one write per record. `--fallback` measures the table-driven
pure-Python CRC that iolab falls back to when google-crc32c cannot be imported.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from _common import ROOT  # noqa: F401  (puts this checkout's iolab on the path)

from iolab.host.dataset import crc32c, tfrecord
from iolab.host.dataset.manifest import Record

RECORD_BYTES = 114_660


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000, help="records per run (default 2000)")
    parser.add_argument("--runs", type=int, default=3, help="runs; the median is reported (default 3)")
    parser.add_argument("--fallback", action="store_true", help="the pure-Python CRC instead of the library")
    args = parser.parse_args()
    if args.fallback:
        crc32c.crc32c = crc32c.crc32c_py
    print(f"crc32c: {crc32c.crc32c.__module__}.{crc32c.crc32c.__qualname__}")
    payload = random.Random(1).randbytes(RECORD_BYTES)
    records = [Record(i, f"train/n000/{i:08d}.jpg", i % 100, payload) for i in range(args.records)]
    rates = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="tfrecord-crc-") as out:
            started = time.perf_counter()
            names = tfrecord.write(Path(out), records, per_shard=1251, total=len(records))
            written = sum(os.path.getsize(Path(out) / name) for name in names)
            seconds = time.perf_counter() - started
        rates.append(written / seconds / 1e6)
        print(f"run {run + 1}: {written / 1e6:.1f} MB in {seconds:.2f} s, {rates[-1]:.1f} MB/s")
    print(f"median {statistics.median(rates):.1f} MB/s over {args.runs} runs of {args.records} records")


if __name__ == "__main__":
    main()
