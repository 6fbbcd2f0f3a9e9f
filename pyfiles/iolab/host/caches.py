"""The host's cache drop, the one every caller uses (host side, stdlib only).

    python -m iolab.host.caches --dir RUN_DIR

sync, then drop the page cache, dentries and inodes (echo 3 > /proc/sys/vm/drop_caches).
Role drop_caches runs this command (under iolab.host.hostrun step), which records the
drop in RUN_DIR/drop_caches.json; fio's prepare drops the caches after its layout
(iolab.kinds.fio.host prepare --drop-caches) and the metadata benchmark before each
operation (iolab.kinds.metadata.host) through the same functions. The storage side's
drop (the hosts of group ceph_osd, a Ceph backend's OSDs and MDS) is role drop_caches'
storage step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from iolab.host import facts

METHOD = "sync; echo 3 > /proc/sys/vm/drop_caches"


def drop() -> str:
    """sync, then drop the page cache, dentries and inodes: '' when done, else why not."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        return f"cannot drop caches ({exc.strerror}): dropping the page cache needs root"
    return ""


def drop_recorded(run_dir: Path) -> int:
    """drop(), recorded in RUN_DIR/drop_caches.json (when, how long, the page cache after); 1 when it failed."""
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    failed = drop()
    if failed:
        print(failed, file=sys.stderr)
        return 1
    record = {
        "dropped_at": time.time(),
        "seconds": time.time() - started,
        "method": METHOD,
        "page_cache_after": facts.meminfo().get("Cached", 0),
    }
    tmp = run_dir / "drop_caches.tmp"
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    tmp.replace(run_dir / "drop_caches.json")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iolab.host.caches", description="sync and drop the caches")
    parser.add_argument("--dir", type=Path, required=True, help="the run's directory: receives drop_caches.json")
    return drop_recorded(parser.parse_args(argv).dir)


if __name__ == "__main__":
    raise SystemExit(main())
