"""What the hosts hand the controller: the files a run writes, the lines of a task's output (stdlib only)."""

from __future__ import annotations

import os

READY_LINE = "iolab-ready:"  # a line of `hostrun run --start-when-told`: prepared at <epoch>; it then reads the start
START_SUFFIX = ".start"  # or as a file's modification time, RUNS/OWNER/RUN.start (through gateways: iolab.drive.fanout)
STORAGE_DROP_JSON = "storage_drop_caches.json"  # beside a run's files: the storage side's cache drop (store.record)
START_JSON = "start.json"  # beside a fan-out run's files: how its common start went (drive.fanout, store.record)
ARCHIVE_LINE = "iolab-archive:"  # a line of the task's output: the run's archive, base64 (iolab.drive.runner)
# Bytes of archive a run returns in that line; a larger one is fetched by collect.yml ($IOLAB_INLINE_MAX overrides).
INLINE_MAX = int(os.environ.get("IOLAB_INLINE_MAX", 8 << 20))
LIVE_FILE = "live.json"  # the running tool's throughput, rewritten as it runs (iolab.host.live, iolab.drive.live)
OSD_FILE = "osd_telemetry.jsonl"  # a Ceph backend's OSD counters (iolab.host.ceph_osds, iolab.store.ceph)
S3_ENV = "IOLAB_S3"  # reader s3's bucket: an s3 backend's connection (JSON; where the keys are, never the keys)
