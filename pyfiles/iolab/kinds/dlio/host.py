"""DLIO itself (dlio_benchmark, MLPerf Storage's reference) as one MPI job over the run's hosts (host side).

    python -m iolab.kinds.dlio.host prepare --host NAME --dir RUN_DIR --root DATASET --workload JSON [--key PATH]
                                    [--drop-caches]                                     (every host: the prepare)
    python -m iolab.kinds.dlio.host launch --hosts JSON [--rsh SSH_ARGV_JSON] [--trace]  (the first host, under hostrun)
    python -m iolab.kinds.dlio.host wait --dir RUN_DIR --ranks N [--appear SECONDS]  (every other host, under hostrun)

The run's prepare (`prepare`) checks the data set as every loader's prepare does (iolab.host.prepare's `problem`),
that DLIO is installed (`refusal`) and that the first host holds mpirun's ssh key (`--key`), then writes DLIO's
workload file, RUN_DIR/dlio/workload/iolab.yaml
(`write_config`): the controller's settings
(iolab.kinds.pytorch.workload.PytorchWorkload.dlio_file) completed with what this host's copy of the data set says (its
files, its class folders, its mean file size). DLIO reads it through Hydra
(`--config-dir RUN_DIR/dlio workload=iolab`): no value goes through Hydra's override grammar.

`launch` replaces itself with `mpirun`: one application context per host (`-np N --host ADDR:N
--wdir ITS_RUN_DIR python -m dlio_benchmark.main --config-dir ...`), so that each host's ranks read
its own workload file (its data set, its run directory); Open MPI starts its daemons on the other
hosts over ssh (`--rsh`, plm_rsh_agent). hostrun watches mpirun: its timeout and a Ctrl-C end the
whole job (mpirun ends its remote daemons and their ranks). DLIO runs untraced, as MLPerf Storage's submitters
run it, unless `--trace` (TRACE_ENV).

`wait` is the tool of every other host: it lives while this host's ranks run (processes whose
arguments name RUN_DIR/dlio) and succeeds when they have written their results
(RUN_DIR/<rank>_output.json, one per rank), so hostrun's telemetry, timeout and archive cover the
host's part of the job. Ranks that do not appear within --appear seconds, or end without their
results, fail it in one line.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from iolab.host import prepare
from iolab.shared import processes

CONFIG_NAME = "iolab"  # RUN_DIR/dlio/workload/iolab.yaml
# dlio_benchmark 2.0.0 traces every rank and reader worker with pydftracer (its trace-*.pfw files) unless this is 0:
# dftracer.logger reads it once, at import, and takes unset as on. With it 0, pydftracer's library is never loaded
# and DLIO's tracing calls return at once. MLCommons' DLIO (mlpstorage's) has pydftracer as an extra its
# submitters do not install, so it runs untraced: so does this leg, unless the workload asks (dlio_trace).
TRACE_ENV = "DFTRACER_ENABLE"
FORMATS = {"npz": "npz", "jpg": "jpeg"}  # iolab's file suffix → DLIO's format (and the suffix it lists)


def config_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "dlio"


def workload_file(run_dir: Path, root: Path, workload: dict[str, Any]) -> dict[str, Any]:
    """DLIO's workload section for this host: the controller's, with this data set's files, folders and sizes."""
    from iolab.host.dataset.manifest import Manifest

    manifest = Manifest.load(root)
    suffixes = {Path(e.path).suffix.lstrip(".") for e in manifest.entries}
    if len(suffixes) != 1 or next(iter(suffixes)) not in FORMATS:
        raise SystemExit(f"{root}: files of suffix {sorted(suffixes)}; DLIO reads one of {sorted(FORMATS)}")
    folders = {Path(e.path).parent for e in manifest.entries}
    if any(folder.parent != Path("train") for folder in folders):
        raise SystemExit(f"{root}: DLIO reads train/<folder>/<file>; this data set is laid out otherwise")
    suffix = next(iter(suffixes))
    # Each DLIO reads its own spelling of the sizes (and the controller's resize): dlio_benchmark 2.0.0
    # record_length*, MLCommons' (mlpstorage's, as a dlio_requirement) record_length_bytes*; neither minds the
    # other's, so both are written.
    dataset = {
        **workload.get("dataset", {}),
        "data_folder": str(_view(run_dir, root, [e.path for e in manifest.entries])),
        "format": FORMATS[suffix],
        "num_files_train": manifest.files,
        "num_samples_per_file": 1,
        "num_subfolders_train": len(folders),
        "record_length": manifest.total_bytes // manifest.files,
        "record_length_stdev": 0,
    }
    dataset |= {
        key.replace("record_length", "record_length_bytes", 1): value
        for key, value in dataset.items()
        if key.startswith("record_length") and not key.startswith("record_length_bytes")
    }
    return {**workload, "dataset": dataset, "output": {"folder": str(run_dir), "log_file": "dlio.log"}}


def _view(run_dir: Path, root: Path, paths: list[str]) -> Path:
    """RUN_DIR.dlio-data, the folder DLIO lists: train/ with the data set's files under DLIO's names for its
    format (x.jpg as x.jpeg: DLIO lists train/*/*.jpeg; NPZ files keep theirs: train/ is a link to the data
    set's), and the empty valid/ DLIO lists too. DLIO reads the data set's own files on the storage under test.
    Beside the run's directory, not in it: the run's archive takes no links (teardown removes it with the
    command's directory)."""
    view = Path(run_dir).with_name(Path(run_dir).name + ".dlio-data")
    (view / "valid").mkdir(parents=True, exist_ok=True)
    suffixes = {Path(path).suffix.lstrip(".") for path in paths}
    if suffixes == {"npz"}:
        (view / "train").unlink(missing_ok=True)
        (view / "train").symlink_to(Path(root) / "train", target_is_directory=True)
        return view
    for path in paths:
        link = (view / path).with_suffix("." + FORMATS[Path(path).suffix.lstrip(".")])
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(Path(root) / path)
    return view


@functools.cache
def _version() -> str | None:
    """DLIO's installed version (None: not installed), read once: the prepare's check and its workload file ask."""
    from importlib import metadata

    try:
        return metadata.version("dlio-benchmark")
    except metadata.PackageNotFoundError:
        return None


def refusal(host: str) -> str | None:
    """Why this host cannot run DLIO's ranks (None when it can): DLIO is not installed."""
    if _version() is None:
        return (
            f"DLIO is not installed in {sys.prefix} on {host}: the campaign's setup phase installs it for a workload "
            "of engine dlio (role iolab_host, tasks/dlio.yml)"
        )
    return None


def write_config(run_dir: Path, root: Path, workload: dict[str, Any]) -> Path:
    """RUN_DIR/dlio/workload/iolab.yaml, and RUN_DIR/dlio/iolab.json: the DLIO that runs it (refusal first)."""
    path = config_dir(run_dir) / "workload" / f"{CONFIG_NAME}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    (config_dir(run_dir) / "iolab.json").write_text(json.dumps({"dlio_version": _version()}) + "\n")
    # JSON is YAML: Hydra reads it as written, and the host side needs no YAML library.
    path.write_text(json.dumps(workload_file(run_dir, root, workload), indent=2) + "\n")
    return path


def trace_env(trace: bool) -> list[str]:
    """mpirun's option that turns DLIO's tracing on or off in every rank, on every host (-x exports it)."""
    return ["-x", f"{TRACE_ENV}={int(trace)}"]


def mpirun_argv(hosts: list[dict[str, Any]], rsh: list[str], python: str, root: bool, trace: bool) -> list[str]:
    """mpirun with one application context per host: {addr, ranks, dir} each."""
    if any(not part or part.split() != [part] for part in rsh):
        # Open MPI splits plm_rsh_agent at blanks itself: such an argument would reach ssh in pieces.
        raise SystemExit(f"the ssh command for mpirun has an empty argument or one with a blank: {rsh}")
    argv = ["mpirun", "--bind-to", "none", "--mca", "plm_rsh_agent", " ".join(rsh), *trace_env(trace)]
    argv += ["--allow-run-as-root"] if root else []
    for i, host in enumerate(hosts):
        run_dir = str(host["dir"])
        argv += [":"] if i else []
        argv += ["-np", str(host["ranks"]), "--host", f"{host['addr']}:{host['ranks']}", "--wdir", run_dir]
        argv += [python, "-m", "dlio_benchmark.main", "--config-dir", str(config_dir(Path(run_dir)))]
        argv += [f"workload={CONFIG_NAME}", f"hydra.run.dir={run_dir}/hydra"]
    return argv


def _ranks_alive(marker: str) -> int:
    """How many processes name `marker` in their arguments (this host's DLIO ranks)."""
    return processes.naming(marker.encode(), b"dlio_benchmark.main")


def wait(run_dir: Path, ranks: int, appear: float, poll: float = 0.2) -> int:
    """0 once this host's ranks have ended with their results; 1, with a line, when they do not."""
    marker, seen, started = str(config_dir(run_dir)), False, time.monotonic()
    while True:
        alive = _ranks_alive(marker)
        seen = seen or alive > 0
        done = len(list(Path(run_dir).glob("*_output.json")))
        if not alive and done >= ranks:
            return 0
        if seen and not alive:
            print(f"DLIO's ranks on this host ended with {done} of {ranks} results in {run_dir}", file=sys.stderr)
            return 1
        if not seen and time.monotonic() - started > appear:
            print(f"no DLIO rank started on this host within {appear:g} s (see the first host's stderr.txt)")
            return 1
        time.sleep(poll)


def prepare_run(host: str, run_dir: Path, root: Path, workload: dict[str, Any], key: str, drop: bool) -> int:
    """The run's prepare: the data set (iolab.host.prepare's check), DLIO, mpirun's `key` on the first host; then this
    host's DLIO workload file, the run directory and the drop (`drop`). Nothing is made before every check passed."""
    started_at = time.time()  # when this call reached the host
    said = prepare.problem("dlio", host, root, [], False) or refusal(host)
    if said := said or prepare.no_key(host, key, "bench_dlio_ssh_key"):
        print(said, file=sys.stderr)
        return 1
    write_config(run_dir, root, workload)
    return prepare.ready(started_at, run_dir, drop)


def main(args: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m iolab.kinds.dlio.host", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("prepare", help="check, write this host's DLIO file, make the run directory, drop the caches")
    pr.add_argument("--host", required=True, help="this host's inventory name, for the messages")
    pr.add_argument("--dir", type=Path, required=True, help="the run's directory on this host")
    pr.add_argument("--root", type=Path, required=True, help="the data set's directory")
    pr.add_argument("--workload", type=json.loads, required=True, help="DLIO's workload settings (JSON)")
    pr.add_argument("--key", default="", help="the first host of several: mpirun's ssh key, checked")
    pr.add_argument("--drop-caches", action="store_true", help="then sync and drop the caches, recording it")
    la = sub.add_parser("launch", help="run the job: mpirun over every host (replaces this process)")
    la.add_argument("--hosts", type=json.loads, required=True)
    la.add_argument("--rsh", type=json.loads, default=["ssh"])
    la.add_argument("--trace", action="store_true", help=f"DLIO's tracing on ({TRACE_ENV}=1; off by default)")
    w = sub.add_parser("wait", help="live while this host's ranks run; fail if they leave no result")
    w.add_argument("--dir", type=Path, required=True)
    w.add_argument("--ranks", type=int, required=True)
    w.add_argument("--appear", type=float, default=120.0)
    ns = p.parse_args(args)
    if ns.cmd == "prepare":
        return prepare_run(ns.host, ns.dir, ns.root, ns.workload, ns.key, ns.drop_caches)
    if ns.cmd == "launch":
        argv = mpirun_argv(ns.hosts, ns.rsh, sys.executable, os.geteuid() == 0, ns.trace)
        os.execvp(argv[0], argv)
    return wait(ns.dir, ns.ranks, ns.appear)


if __name__ == "__main__":
    sys.exit(main())
