"""fio job files: the built-in profiles of the field report, the options a campaign may give, and the room a job needs.

A profile is a set of fio options; the controller turns it into a job file that
the `bench_fio` role writes on the host (never a command line through a shell), and the host
(iolab.kinds.fio.host) sizes and lays it out. Stdlib only.
"""

from __future__ import annotations

import re
from pathlib import Path

from iolab.shared import fio_jobfile

# The fio bssplit that emulates ImageNet training JPEG reads (docs/REFERENCE_FIGURES.md).
IMAGENET_BSSPLIT = "2K/1:4K/2:8K/4:16K/8:32K/13:64K/38:128K/33:256K/1"

_COMMON = {"ioengine": "libaio", "direct": "1", "iodepth": "32"}

# fio creating and filling a job's files, incompressible, before anything is timed (fio's prepare, an rbd_snapshot's
# load too: iolab.host.storage.rbdsnapshot). Nothing of this fio is timed: it calibrates no CPU clock (`clocksource`:
# ≈ 70 ms of its start here) and keeps no disk statistics.
LAY_OUT = ["fio", "--create_only=1", "--refill_buffers=1", "--clocksource=clock_gettime", "--disk_util=0"]
LAY_OUT += ["--output=/dev/null"]

PROFILES: dict[str, dict[str, str]] = {
    # Large sequential reads with a deep queue: the storage's streaming ceiling.
    "seq-read-1m": {**_COMMON, "rw": "read", "bs": "1M"},
    # Small random reads: IOPS and latency.
    "rand-read-16k": {**_COMMON, "rw": "randread", "bs": "16k"},
    # ImageNet-shaped random reads, as the field report ran them.
    "imagenet-bssplit": {
        **_COMMON,
        "rw": "randread",
        "bssplit": IMAGENET_BSSPLIT,
        "iodepth": "128",
        "norandommap": "1",
    },
    # Large sequential writes, for scratch targets only.
    "seq-write-1m": {**_COMMON, "rw": "write", "bs": "1M"},
    # imagenet-bssplit with the bssplit of the campaign's own data set, computed on each host
    # from its files' size histogram (prepare --bssplit-from).
    "bssplit-from-dataset": {**_COMMON, "rw": "randread", "iodepth": "128", "norandommap": "1"},
}
BSSPLIT_FROM_DATASET = "bssplit-from-dataset"


def rbd_options(pool: str, image: str, client: str) -> dict[str, str]:
    """fio's rbd engine on an RBD image (librbd, no file system); CEPH_CONF and CEPH_ARGS name the cluster."""
    return {"ioengine": "rbd", "clientname": client, "pool": pool, "rbdname": image}


_KEY = re.compile(r"^[a-z][a-z0-9_]*$")


def profile_options(profile: str, overrides: dict[str, str | int]) -> dict[str, str]:
    """A profile's options with the workload's overrides; values are checked for job-file safety, and
    options iolab refuses in any job file (fio_jobfile.REFUSED, an alias resolved) are refused here too."""
    options = dict(PROFILES[profile])
    for key, value in overrides.items():
        text = str(value)
        why = fio_jobfile.REFUSED.get(fio_jobfile.ALIASES.get(key, key))
        if not _KEY.match(key) or why or "\n" in text or "\r" in text:
            raise ValueError(f"fio option {key}={text!r} is not allowed" + (f": it {why}" if why else ""))
        options[key] = text
    return options


def render(options: dict[str, str], jobname: str) -> str:
    """The job file text (what the role writes; shown by --dry-run)."""
    lines = ["[global]"] + [f"{k}={v}" for k, v in options.items()] + [f"[{jobname}]", ""]
    return "\n".join(lines)


DATA_FILE = "iolab-fio.dat"
_MIB = 1 << 20


def check_room(needed: int, room: int, where: str, fix: str, needs: str = "the job needs") -> None:
    """Refuse (ValueError) a job that needs more than nine tenths of the `room` of `where`."""
    if needed > room * 0.9:
        raise ValueError(
            f"{needs} {needed / _MIB:.0f} MiB but {where} has {room / _MIB:.0f} MiB free "
            f"(iolab leaves a tenth free); {fix} or give the backend more space"
        )


_JOBFILE_FIX = "lower size=, filesize=, nrfiles= or numjobs= in the job file"


def jobfile_room(
    job: fio_jobfile.JobFile, limit: int, free: int | None, where: str, workdir: Path | None = None
) -> int:
    """The bytes a user's job file lays out per host (fio_jobfile.layout), refused (ValueError, before
    fio runs) above the workload's `limit` (size, bench.fio --size; 0: none) or the room of `where`:
    `free` bytes (None: not known here), and on a host the job's files already in `workdir`."""
    extents = fio_jobfile.layout(job)
    needed = sum(extents.values())
    if limit and needed > limit:
        raise ValueError(
            f"the job file lays out {needed / _MIB:.0f} MiB per host, more than the workload's size of "
            f"{limit / _MIB:.0f} MiB (bench.fio --size); {_JOBFILE_FIX}, or raise the size"
        )
    there = [(workdir / name, extent) for name, extent in extents.items()] if workdir else []
    existing = sum(min(path.stat().st_size, extent) for path, extent in there if path.is_file())
    if free is not None and needed > existing:
        check_room(needed, free + existing, where, _JOBFILE_FIX, "the job file lays out")
    return needed
