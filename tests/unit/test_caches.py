"""One cache drop on a host (iolab.host.caches): role drop_caches' command, fio's prepare and the metadata
benchmark all drop through it."""

from __future__ import annotations

import json
import subprocess
import sys

from iolab.host import caches
from tests.conftest import needs_root


@needs_root()
def test_the_command_drops_and_records_the_drop(tmp_path):
    done = subprocess.run([sys.executable, "-m", "iolab.host.caches", "--dir", str(tmp_path / "run")], text=True)
    assert done.returncode == 0
    record = json.loads((tmp_path / "run" / "drop_caches.json").read_text())
    assert record["method"] == caches.METHOD == "sync; echo 3 > /proc/sys/vm/drop_caches"
    assert record["seconds"] >= 0 and record["page_cache_after"] > 0
