"""What the benchmarks of iolab itself share: running `./lab` tasks and timing them."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pyfiles"))  # the benchmarks import iolab from this checkout


def loader_argv(root: object, out: object) -> list[str]:
    """The PyTorch loader's command on this machine, over the data set at `root`, its result in `out`."""
    return [sys.executable, "-m", "iolab.kinds.pytorch.host", "--root", str(root), "--out", str(out)]


def drop_caches() -> None:
    """sync, then drop the page cache, dentries and inodes (root), as iolab does before a run."""
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def lab(*args: str, results: Path, check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    """Run an invoke task as `./lab` does (without the install check); (wall seconds, process)."""
    env = {**os.environ, "IOLAB_RESULTS": str(results)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "invoke", "--write-pyc", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    seconds = time.monotonic() - started
    if check and done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return seconds, done


def samples(results: Path, campaign: str) -> list[dict]:
    path = results / campaign / "samples.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def write_campaign(data: dict) -> Path:
    import yaml

    handle = tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False)
    yaml.safe_dump(data, handle, sort_keys=False)
    handle.close()
    return Path(handle.name)


def job_args(doc: str | None):
    """--rounds, --runtime and --ramp: what the fio benchmarks of iolab share."""
    import argparse

    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--rounds", type=int, default=3, help="alternations (default 3)")
    parser.add_argument("--runtime", type=float, default=4, help="fio's timed part in seconds (default 4)")
    parser.add_argument("--ramp", type=float, default=1, help="fio's ramp in seconds (default 1)")
    return parser.parse_args()


@contextlib.contextmanager
def private_tmpfs(name: str, size: str):
    """A tmpfs of `size` (mount's syntax, e.g. 1g) on a fresh directory, unmounted and removed after."""
    mount = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", name, str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)
        mount.rmdir()


def spread(values: list[float]) -> str:
    med = statistics.median(values)
    return f"median {med:.3g}, min {min(values):.3g}, max {max(values):.3g} (n={len(values)})"
