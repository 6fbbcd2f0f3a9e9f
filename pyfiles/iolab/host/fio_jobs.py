"""fio job files: the built-in profiles of the field report, and users' own job files.

A profile is a set of fio options; the controller turns it into a job file that
the `bench_fio` role writes on the host (never a command line through a shell).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from iolab.host import fio_jobfile

# The fio bssplit that emulates ImageNet training JPEG reads (docs/REFERENCE_FIGURES.md).
IMAGENET_BSSPLIT = "2K/1:4K/2:8K/4:16K/8:32K/13:64K/38:128K/33:256K/1"

_COMMON = {"ioengine": "libaio", "direct": "1", "iodepth": "32"}

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


# fio options that run commands: never accepted from a campaign or a user's job file.
_FORBIDDEN = ("exec_prerun", "exec_postrun", "ioscheduler")
_KEY = re.compile(r"^[a-z][a-z0-9_]*$")


def profile_options(profile: str, overrides: dict[str, str | int]) -> dict[str, str]:
    """A profile's options with the workload's overrides; values are checked for job-file safety."""
    options = dict(PROFILES[profile])
    for key, value in overrides.items():
        text = str(value)
        if not _KEY.match(key) or key in _FORBIDDEN or "\n" in text or "\r" in text:
            raise ValueError(f"fio option {key}={text!r} is not allowed")
        options[key] = text
    return options


def render(options: dict[str, str], jobname: str) -> str:
    """The job file text (what the role writes; shown by --dry-run)."""
    lines = ["[global]"] + [f"{k}={v}" for k, v in options.items()] + [f"[{jobname}]", ""]
    return "\n".join(lines)


# --- host side: size the job to the target, write the job file, prefill --------------------

DATA_FILE = "iolab-fio.dat"
DEFAULT_SIZE = 1 << 30
MIN_SIZE = 16 << 20
_MIB = 1 << 20


def choose_size(wanted: int, free: int, existing: int) -> int:
    """The data file size for a target with `free` bytes free and `existing` bytes already laid out.

    `wanted` 0 means: as much as fits, up to 1 GiB, leaving a fifth of the space free.
    """
    room = free + existing
    if wanted and wanted == existing:
        return wanted  # laid out already (on a read-only snapshot, there is no room for another)
    if wanted:
        check_room(wanted, room, "the target", "lower the workload's size")
        return wanted
    size = min(DEFAULT_SIZE, int(room * 0.8)) // _MIB * _MIB
    if size < MIN_SIZE:
        raise ValueError(
            f"the target has only {room / _MIB:.0f} MiB free; fio needs at least {MIN_SIZE / _MIB * 1.25:.0f} MiB"
        )
    return size


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


def dataset_bssplit(root: Path) -> dict:
    """The bssplit of the data set at `root` (its files' size histogram) and the data set's identity."""
    import hashlib

    from iolab.host.dataset.histogram import bssplit, histogram
    from iolab.host.dataset.manifest import MANIFEST_NAME

    manifest = root / MANIFEST_NAME
    if not manifest.is_file():
        raise ValueError(
            f"{root} holds no data set ({MANIFEST_NAME} missing); the campaign's dataset phase "
            "makes it: give the campaign a dataset"
        )
    digest = hashlib.sha256()
    with open(manifest, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"bssplit": bssplit(histogram(root)), "bssplit_from": str(root), "dataset_manifest_hash": digest.hexdigest()}


def prepare(
    run_dir: Path,
    workdir: Path,
    options: dict[str, str],
    wanted: int,
    jobfile: Path | None,
    bssplit_from: Path | None = None,
    allow_devices: tuple[str, ...] = (),
) -> dict:
    """Write RUN_DIR/job.fio for a job on `workdir` and lay its file out before the timed run.

    `bssplit_from` (relative to `workdir`, or absolute): a data set whose size histogram
    gives the job's bssplit, as `iolab.host.dataset histogram` computes it. A user's `jobfile`
    is checked here again (iolab.host.fio_jobfile; `allow_devices` as the backend allows them)
    and job.fio is the text that was checked.
    """
    import json
    import os

    if not shutil.which("fio"):
        raise ValueError("fio is not installed on this host; run `invoke lab.setup` for it")
    run_dir.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    if jobfile is not None:
        # fio runs in `workdir`: relative file names land on the target.
        job = fio_jobfile.check_on_host(fio_jobfile.load(jobfile), workdir, allow_devices)
        stat = os.statvfs(workdir)
        free = stat.f_bavail * stat.f_frsize
        needed = jobfile_room(job, wanted, free, "the target", workdir)
        text = job.text
        chosen = {"jobfile": str(jobfile), "layout_bytes": needed, "free_bytes": free}
    elif options.get("ioengine") == "rbd":
        # librbd on the image the storage role created and prefilled: no file to size or lay out.
        options = {**options, "size": str(wanted), "write_bw_log": str(run_dir / "fio"), "log_avg_msec": "1000"}
        (run_dir / "job.fio").write_text(render(options, "iolab"))
        chosen = {"size": wanted, "size_chosen": "image", "rbd": f"{options['pool']}/{options['rbdname']}"}
        (run_dir / "fio_job.json").write_text(json.dumps(chosen, indent=1))
        return chosen
    else:
        data = workdir / DATA_FILE
        stat = os.statvfs(workdir)
        existing = data.stat().st_size if data.exists() else 0
        size = choose_size(wanted, stat.f_bavail * stat.f_frsize, existing)
        if existing > size:
            data.unlink()  # fio reads only `size` bytes of a larger file but the rest holds the space
        from_dataset = dataset_bssplit(workdir / bssplit_from) if bssplit_from else {}
        if from_dataset:
            options = {**options, "bssplit": from_dataset["bssplit"]}
        # Per-second bandwidth logs let the controller add hosts up over their common window.
        options = {
            **options,
            "filename": str(data),
            "size": str(size),
            "write_bw_log": str(run_dir / "fio"),
            "log_avg_msec": "1000",
        }
        text = render(options, "iolab")
        chosen = {
            "size": size,
            "size_chosen": "auto" if not wanted else "campaign",
            "free_bytes": stat.f_bavail * stat.f_frsize,
            "file": str(data),
            **from_dataset,
        }
    (run_dir / "job.fio").write_text(text)
    (run_dir / "fio_job.json").write_text(json.dumps(chosen, indent=1))
    if jobfile is None and existing == chosen["size"]:
        return chosen  # laid out by an earlier run on this target
    layout = subprocess.run(
        ["fio", "--create_only=1", "--refill_buffers=1", "--output=/dev/null", str(run_dir / "job.fio")],
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    if layout.returncode != 0:
        reason = (layout.stderr.strip() or layout.stdout.strip()).splitlines()
        raise ValueError(f"fio could not lay out the job's files: {reason[-1] if reason else 'no message'}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(prog="python -m iolab.host.fio_jobs")
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="size, write and lay out a job on a target directory")
    prep.add_argument("--dir", type=Path, required=True, help="the run's directory on this host")
    prep.add_argument("--workdir", type=Path, required=True, help="where the job's files go")
    prep.add_argument("--options", default="{}", help="fio options as a JSON object")
    prep.add_argument("--size", type=int, default=0, help="bytes; 0 = what fits, up to 1 GiB")
    prep.add_argument("--jobfile", type=Path, help="a user's job file, checked again here (iolab.host.fio_jobfile)")
    prep.add_argument(
        "--allow-device",
        action="append",
        default=[],
        dest="allow_devices",
        help="a device the job file may name (the backend's allow_devices); repeatable",
    )
    prep.add_argument(
        "--bssplit-from", type=Path, help="data set whose size histogram gives the bssplit (relative to --workdir)"
    )
    prep.add_argument(
        "--drop-caches",
        action="store_true",
        help="then sync and drop the caches (after the layout, which fills them), recording it",
    )
    opts = parser.parse_args(argv)
    started_at = time.time()  # when this task reached the host: sizes the lead of the common start
    try:
        chosen = prepare(
            opts.dir,
            opts.workdir,
            json.loads(opts.options),
            opts.size,
            opts.jobfile,
            opts.bssplit_from,
            tuple(opts.allow_devices),
        )
    except ValueError as exc:
        print(f"{opts.workdir}: {exc}", file=sys.stderr)
        return 1
    if opts.drop_caches:
        from iolab.host.hostrun import drop_caches

        if drop_caches(opts.dir) != 0:
            return 1
    print(json.dumps({**chosen, "started_at": started_at}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
