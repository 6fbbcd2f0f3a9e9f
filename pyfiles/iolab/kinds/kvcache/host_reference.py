"""MLCommons' kv-cache.py (MLPerf Storage v3.0's KV-cache reference) as one MPI job over the run's hosts (host side).

    python -m iolab.kinds.kvcache.host_reference install --source SOURCE       (the setup phase: roles/iolab_host)
    python -m iolab.kinds.kvcache.host_reference prepare --host NAME --run-dir RUN_DIR --dir WORKDIR --clients N
                                                 --options JSON [--pause S] [--drop-caches] [--key PATH]
    python -m iolab.kinds.kvcache.host_reference launch --hosts JSON --options JSON [--rsh SSH_ARGV_JSON] [--option K]
    python -m iolab.kinds.kvcache.host_reference wait --dir RUN_DIR --ranks N [--appear SECONDS] [--option K]
    python -m iolab.kinds.kvcache.host_reference rank --dir WORKDIR --out RUN_DIR --options JSON   (what mpirun starts)

`install` puts the reference's package (kv_cache, from its kv_cache_benchmark folder's pyproject) into this
Python's environment from the campaign's pinned source — a git URL at a commit, a folder or a wheel on the
hosts — unless that very source is installed already; it prints what runs: the version, the source, the git
commit or the hash of the package's files. iolab never ships the tool. `refusal`, in the run's prepare (`prepare`:
iolab.kinds.kvcache.host's, with this refusal and, on the first host, mpirun's `--key`), refuses in one line when
it is missing, and as iolab.kinds.kvcache.host refuses a target without room or a host without memory.

`launch` (the first host, under hostrun) runs mpirun with one application context per host (`-np N --host
ADDR:N --wdir ITS_RUN_DIR python -m iolab.kinds.kvcache.host_reference rank ...`), Open MPI's daemons started over ssh
(`--rsh`), then writes this host's summary. `rank` is mlperf_wrapper.py's part: it gives the rank of local
number k (OMPI_COMM_WORLD_LOCAL_RANK) its own cache directory WORKDIR/rank_<k> and result file
RUN_DIR/rank_<k>/kvcache_results_<k>.json, runs `python -m kv_cache.cli` with the workload's settings, and
removes the rank's files afterwards. Every other host runs `wait`: it lives while its ranks run, then writes
its summary. The summary is iolab.kinds.kvcache.host.summarize's, the rules' aggregation (6.3.4) over the host's
ranks; the controller adds the hosts up.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from iolab.kinds.kvcache import host as kvcache
from iolab.shared import processes
from iolab.shared.kvcache_model import REFERENCE_MODELS, templates

DIST = "mlperf-kv-cache"  # the reference's distribution name (its pyproject)
PACKAGE = "kv_cache"
CUSTOM = "iolab-shape"  # the model the config file defines for a workload given by its shape
MARKER = "iolab.kinds.kvcache.host_reference"


def _tree_hash(root: Path) -> str:
    """sha256 over the package's Python files, names and contents, in order: what ran, when no commit says it."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def installed() -> dict[str, Any] | None:
    """The reference installed in this environment: version, source, commit or file hash; None when missing."""
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        return None
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    package = Path(str(dist.locate_file(PACKAGE)))
    return {
        "version": dist.version,
        "source": direct.get("url", "index"),
        "commit": (direct.get("vcs_info") or {}).get("commit_id"),
        "files_sha256": _tree_hash(package) if package.is_dir() else None,
    }


def _same(have: dict[str, Any], source: str) -> bool:
    """Whether `source` is what is installed: the git commit it names, or a folder of the same files."""
    if source.startswith("git+"):
        return bool(have["commit"]) and source.rpartition("@")[2].split("#")[0] == have["commit"]
    path = Path(source)
    if have["source"] != path.resolve().as_uri():
        return False
    return not path.is_dir() or _tree_hash(path / PACKAGE) == have["files_sha256"]


def install(source: str) -> int:
    have = installed()
    if have is None or not _same(have, source):
        argv = [sys.executable, "-m", "pip", "install", "--no-deps", "--force-reinstall", "--quiet", source]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
            print(f"cannot install MLCommons' kv-cache.py from {source}: {why}", file=sys.stderr)
            return 1
        have = installed()
    print(json.dumps(have))
    return 0


def refusal(directory: Path, clients: int, options: dict[str, Any]) -> str | None:
    if installed() is None:
        return (
            f"MLCommons' kv-cache.py is not installed in {sys.prefix}: engine mlperf-kvcache installs it from the "
            "workload's kvcache_source (a git URL at a commit, a folder or a wheel of mlcommons/storage's "
            "kv_cache_benchmark)"
        )
    return kvcache.refusal(directory, clients, options)


def config(options: dict[str, Any]) -> dict[str, Any]:
    """kv-cache.py's --config: the user templates at the workload's context scale, and the model's shape when it
    is not one of the presets (JSON: YAML reads it)."""
    table = templates(options.get("context_scale", 1.0))
    out: dict[str, Any] = {
        "user_templates": {
            name: {"context_range": list(c), "generation_range": list(g), "think_time_range": list(t)}
            for name, (c, g, t) in table.items()
        }
    }
    if options.get("model") not in REFERENCE_MODELS:
        heads = options["kv_heads"]
        out["model_configs"] = {
            CUSTOM: {
                "name": CUSTOM,
                "num_layers": options["layers"],
                "hidden_dim": heads * options["head_dim"],
                "num_heads": heads,
                "kv_heads": heads,
                "kv_dim_per_head": options["head_dim"],
                "dtype": "float16",
            }
        }
    return out


def tool_argv(options: dict[str, Any], cache: Path, output: Path, config_file: Path, capacity: float) -> list[str]:
    """`python -m kv_cache.cli` with the workload's settings, as mlpstorage passes an option's."""
    gib = 1 << 30
    model = REFERENCE_MODELS.get(options.get("model") or "", CUSTOM)
    return [
        sys.executable, "-m", f"{PACKAGE}.cli",
        "--model", model,
        "--num-users", str(options["users"]),
        "--duration", str(round(options["duration"])),
        "--gpu-mem-gb", repr(options.get("gpu_bytes", 0) / gib),
        "--cpu-mem-gb", repr(options.get("cpu_bytes", 0) / gib),
        "--max-concurrent-allocs", str(options.get("allocs", 0)),
        "--generation-mode", options.get("generation", "none"),
        "--seed", str(options["seed"]),
        "--cache-dir", str(cache),
        "--output", str(output),
        "--config", str(config_file),
        "--storage-capacity-gb", repr(capacity / gib),
    ]  # fmt: skip


def rank(directory: Path, out: Path, options: dict[str, Any]) -> int:
    """One MPI rank: the reference on its own cache directory, its files removed afterwards."""
    index = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    clients = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
    cache = directory / f"rank_{index}"
    place = out / f"rank_{index}"
    place.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    config_file = place / "config.json"
    config_file.write_text(json.dumps(config(options), indent=1) + "\n")
    capacity = kvcache.room(directory) / clients  # each rank's share of the room to 9/10 full
    argv = tool_argv(options, cache, place / f"kvcache_results_{index}.json", config_file, capacity)
    (place / "argv.json").write_text(json.dumps(argv) + "\n")
    try:
        with open(place / "kv-cache.log", "wb") as log:
            return subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT).returncode
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        with contextlib.suppress(OSError):
            directory.rmdir()  # the last rank out: the work directory goes once empty


def mpirun_argv(hosts: list[dict[str, Any]], rsh: list[str], options: dict[str, Any], root: bool) -> list[str]:
    """mpirun with one application context per host: {addr, ranks, dir (its run directory), work} each."""
    if any(not part or part.split() != [part] for part in rsh):
        raise SystemExit(f"the ssh command for mpirun has an empty argument or one with a blank: {rsh}")
    argv = ["mpirun", "--bind-to", "none", "--mca", "plm_rsh_agent", " ".join(rsh)]
    argv += ["--allow-run-as-root"] if root else []
    for i, host in enumerate(hosts):
        argv += [":"] if i else []
        argv += ["-np", str(host["ranks"]), "--host", f"{host['addr']}:{host['ranks']}", "--wdir", str(host["dir"])]
        argv += [sys.executable, "-m", MARKER, "rank", "--dir", str(host["work"]), "--out", str(host["dir"])]
        argv += ["--options", json.dumps(options)]
    return argv


def _ranks_alive(run_dir: Path) -> int:
    """How many of this host's processes are ranks of the job writing to `run_dir`."""
    return processes.naming(MARKER.encode(), b"rank", str(run_dir).encode())


def wait(run_dir: Path, ranks: int, appear: float, poll: float = 0.2) -> int:
    """0 once this host's ranks have ended; 1, with a line, when none started within `appear` seconds."""
    seen, started = False, time.monotonic()
    while True:
        alive = _ranks_alive(run_dir)
        seen = seen or alive > 0
        if seen and not alive:
            return 0
        if not seen and time.monotonic() - started > appear:
            print(f"no kv-cache.py rank started on this host within {appear:g} s (see the first host's stderr.txt)")
            return 1
        time.sleep(poll)


def _summarized(run_dir: Path, ranks: int, option: int, code: int) -> int:
    found = kvcache.summarize(run_dir, ranks, "kv-cache.py", option)
    have = installed() or {}
    (run_dir / "mlperf_kvcache.json").write_text(json.dumps({"installed": have}) + "\n")
    missing = found["options"][str(option)]["missing_files"]
    if missing:
        print(f"kv-cache.py left no result for {', '.join(missing)} (see their kv-cache.log)", file=sys.stderr)
    return code or (1 if missing else 0)


def main(args: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MARKER}", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("install").add_argument("--source", required=True)
    la = sub.add_parser("launch")
    la.add_argument("--hosts", type=json.loads, required=True)
    la.add_argument("--options", type=json.loads, required=True)
    la.add_argument("--rsh", type=json.loads, default=["ssh"])
    la.add_argument("--option", type=int, default=0)
    w = sub.add_parser("wait")
    w.add_argument("--dir", type=Path, required=True)
    w.add_argument("--ranks", type=int, required=True)
    w.add_argument("--appear", type=float, default=120.0)
    w.add_argument("--option", type=int, default=0)
    r = sub.add_parser("rank")
    r.add_argument("--dir", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--options", type=json.loads, required=True)
    pr = sub.add_parser("prepare")
    kvcache.prepare_options(pr)
    pr.add_argument("--dir", type=Path, required=True)
    pr.add_argument("--clients", type=int, default=1)
    pr.add_argument("--options", type=json.loads, required=True)
    pr.add_argument("--key", default="", help="the first host of several: mpirun's ssh key, checked")
    ns = p.parse_args(args)
    if ns.cmd == "install":
        return install(ns.source)
    if ns.cmd == "prepare":
        if ns.run_dir is None:
            p.error("prepare needs --run-dir RUN_DIR")
        return kvcache.prepare_run(
            ns.host, ns.run_dir, ns.dir, ns.clients, ns.options, ns.pause, ns.drop_caches, refusal, ns.key
        )
    if ns.cmd == "rank":
        return rank(ns.dir, ns.out, ns.options)
    if ns.cmd == "launch":
        first = ns.hosts[0]
        code = subprocess.run(mpirun_argv(ns.hosts, ns.rsh, ns.options, os.geteuid() == 0)).returncode
        return _summarized(Path(first["dir"]), int(first["ranks"]), ns.option, code)
    code = wait(ns.dir, ns.ranks, ns.appear)
    return _summarized(ns.dir, ns.ranks, ns.option, code)


if __name__ == "__main__":
    sys.exit(main())
