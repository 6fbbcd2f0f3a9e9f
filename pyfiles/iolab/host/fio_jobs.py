"""fio job files on a host: size the job to the target, write the job file, prefill the data file.

    python -m iolab.host.fio_jobs prepare ...

The job's options come from the controller (iolab.shared.fio_options: the built-in profiles,
a workload's overrides, a user's checked job file).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from iolab.shared import fio_jobfile
from iolab.shared.fio_options import DATA_FILE, check_room, jobfile_room, render

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
    is checked here again (iolab.shared.fio_jobfile; `allow_devices` as the backend allows them)
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
    prep.add_argument("--jobfile", type=Path, help="a user's job file, checked again here (iolab.shared.fio_jobfile)")
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
        from iolab.host import caches

        if caches.drop_recorded(opts.dir) != 0:
            return 1
    print(json.dumps({**chosen, "started_at": started_at}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
