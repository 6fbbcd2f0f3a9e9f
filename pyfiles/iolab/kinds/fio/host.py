"""fio job files on a host: size the job to the target, write the job file, prefill the data file.

    python -m iolab.kinds.fio.host prepare ...

The job's options come from the controller (iolab.shared.fio_options: the built-in profiles,
a workload's overrides, a user's checked job file).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from iolab.shared import fio_jobfile, fio_options
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
    if not shutil.which("fio"):
        raise ValueError("fio is not installed on this host; run `invoke lab.setup` for it")
    run_dir.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    if jobfile is not None:
        text, chosen = _user_job(workdir, jobfile, wanted, allow_devices)
        laid_out = False
    elif options.get("ioengine") == "rbd":
        text, chosen = _rbd_job(run_dir, options, wanted)
        laid_out = True  # the image the storage role created and prefilled: no file to lay out
    else:
        text, chosen, laid_out = _file_job(run_dir, workdir, options, wanted, bssplit_from)
    (run_dir / "job.fio").write_text(text)
    (run_dir / "fio_job.json").write_text(json.dumps(chosen, indent=1))
    if not laid_out:
        _lay_out(run_dir / "job.fio", workdir)
    return chosen


def _free(workdir: Path) -> int:
    stat = os.statvfs(workdir)
    return stat.f_bavail * stat.f_frsize


def _user_job(workdir: Path, jobfile: Path, wanted: int, allow_devices: tuple[str, ...]) -> tuple[str, dict]:
    """A user's job file, checked on this host against the target's room: its text and what was chosen."""
    # fio runs in `workdir`: relative file names land on the target.
    job = fio_jobfile.check_on_host(fio_jobfile.load(jobfile), workdir, allow_devices)
    free = _free(workdir)
    needed = jobfile_room(job, wanted, free, "the target", workdir)
    return job.text, {"jobfile": str(jobfile), "layout_bytes": needed, "free_bytes": free}


def _rbd_job(run_dir: Path, options: dict[str, str], wanted: int) -> tuple[str, dict]:
    """A job through librbd on the storage role's image: no file to size."""
    options = {**options, "size": str(wanted), "write_bw_log": str(run_dir / "fio"), "log_avg_msec": "1000"}
    chosen = {"size": wanted, "size_chosen": "image", "rbd": f"{options['pool']}/{options['rbdname']}"}
    return render(options, "iolab"), chosen


def _file_job(
    run_dir: Path, workdir: Path, options: dict[str, str], wanted: int, bssplit_from: Path | None
) -> tuple[str, dict, bool]:
    """A job on one data file in `workdir`, sized to the target: its text, what was chosen, and whether the file
    is laid out already (by an earlier run on this target)."""
    data = workdir / DATA_FILE
    free = _free(workdir)
    existing = data.stat().st_size if data.exists() else 0
    size = choose_size(wanted, free, existing)
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
    chosen = {
        "size": size,
        "size_chosen": "auto" if not wanted else "campaign",
        "free_bytes": free,
        "file": str(data),
        **from_dataset,
    }
    return render(options, "iolab"), chosen, existing == size


def _lay_out(job: Path, workdir: Path) -> None:
    """Have fio create and fill the job's files (fio_options.LAY_OUT), before the timed run."""
    layout = subprocess.run(
        [*fio_options.LAY_OUT, str(job)],
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    if layout.returncode != 0:
        reason = (layout.stderr.strip() or layout.stdout.strip()).splitlines()
        raise ValueError(f"fio could not lay out the job's files: {reason[-1] if reason else 'no message'}")


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m iolab.kinds.fio.host")
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="size, write and lay out a job on a target directory")
    prep.add_argument("--dir", type=Path, required=True, help="the run's directory on this host")
    prep.add_argument("--workdir", type=Path, required=True, help="where the job's files go")
    prep.add_argument("--options", default="{}", help="fio options as a JSON object")
    prep.add_argument("--size", type=int, default=0, help="bytes; 0 = what fits, up to 1 GiB")
    job = prep.add_mutually_exclusive_group()
    job.add_argument("--jobfile", type=Path, help="a user's job file, checked again here (iolab.shared.fio_jobfile)")
    job.add_argument("--jobtext", help="a user's job file's text, written as the run's user.fio, then as --jobfile")
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
    if opts.jobtext is not None:
        opts.dir.mkdir(parents=True, exist_ok=True)
        opts.jobfile = opts.dir / "user.fio"
        opts.jobfile.write_text(opts.jobtext)
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
    from iolab.host.prepare import ready

    return ready(started_at, opts.dir, opts.drop_caches, chosen)


if __name__ == "__main__":
    raise SystemExit(main())
