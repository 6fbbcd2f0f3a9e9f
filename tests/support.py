"""Helpers shared by the tests: the CLI as a user runs it, iolab.host.hostrun as a host runs it, mounts left behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# A tool of known rate: reads 4 MiB from /dev/zero and writes it to /dev/null every 0.25 s (16 MiB/s each way)
# for argv[1] seconds: `python3 -c PACED 8`.
PACED = (
    "import os,sys,time\n"
    "src,dst=os.open('/dev/zero',os.O_RDONLY),os.open('/dev/null',os.O_WRONLY)\n"
    "end=time.monotonic()+float(sys.argv[1])\n"
    "while time.monotonic()<end:\n"
    "    os.write(dst,os.read(src,4<<20)); time.sleep(0.25)\n"
)


def hostrun(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m iolab.host.hostrun ARGS` with this checkout's iolab, as a host runs it."""
    env = {**(os.environ if env is None else env), "PYTHONPATH": str(ROOT / "pyfiles")}
    return subprocess.run(
        [sys.executable, "-m", "iolab.host.hostrun", *args], env=env, capture_output=True, text=True, timeout=60
    )


class Cli:
    """`./lab TASK ...` as a user runs it (without the install step), with private results."""

    def __init__(self, results: Path):
        self.results = results
        self.env = {**os.environ, "IOLAB_RESULTS": str(results), "COLUMNS": "200"}
        # A search's probe that foreign CPU disturbed counts at once (flagged), not after two runs more: under the
        # CI the other pytest-xdist worker disturbs nearly every probe (iolab.run.accelerators.RETRIES_ENV).
        self.env["IOLAB_DISTURBED_RETRIES"] = "0"

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "invoke", "--write-pyc", *args]  # as ./lab runs it

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(self.argv(*args), cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=600)
        if check and done.returncode != 0:
            raise AssertionError(f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def bench(self, campaign: Path, check: bool = True, wait: float = 600.0) -> subprocess.CompletedProcess:
        """bench.all on localhost, waiting (up to `wait` s) while another test run's campaign holds its lease."""
        deadline = time.monotonic() + wait
        while True:
            done = self("bench.all", "--campaign", str(campaign), check=False)
            if done.returncode == 0 or (not check and "is held by campaign" not in done.stderr):
                return done
            assert "is held by campaign" in done.stderr and time.monotonic() < deadline, done.stdout + done.stderr
            time.sleep(5)

    def samples(self, campaign: str) -> list[dict]:
        path = self.results / campaign / "samples.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def runs(self, campaign: str) -> list[dict]:
        path = self.results / campaign / "runs.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def mounted(prefix: str = "/mnt/iolab/itest") -> list[str]:
    """Mount points under `prefix` (what a test must leave behind: none)."""
    out = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.startswith(prefix)]


def cmdline(pid: int) -> str:
    """A process's command line, its arguments joined by spaces ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def tmpfs_campaign(directory: Path, name: str, workloads: list[dict], repetitions: int = 1) -> Path:
    """A campaign `name` of `workloads` on one 48 MiB tmpfs backend (itest-<name>), as <directory>/<name>.yml."""
    path = directory / f"{name}.yml"
    backend = {"name": f"itest-{name}", "type": "tmpfs", "size": "48MiB"}
    campaign = {"name": name, "repetitions": repetitions, "workloads": workloads, "backends": [backend]}
    path.write_text(yaml.safe_dump(campaign))
    return path


def two_workers(samples):
    """Batches of 7 of a loader's Samples from 2 persistent workers, each with 2 batches in flight, shuffled."""
    from torch.utils.data import DataLoader

    from iolab.host.loader.readers import collate

    return DataLoader(
        samples,
        batch_size=7,
        shuffle=True,
        num_workers=2,
        prefetch_factor=2,
        collate_fn=collate,
        persistent_workers=True,
    )


# What a test's Sample holds where the test does not say (plain_sample).
PLAIN_SAMPLE = {"campaign": "c", "run_id": "r1", "repetition": 1, "host": "h1", "backend": "b", "workload": "w"}
PLAIN_SAMPLE |= {"metric": "read_bw", "value": 1.0, "unit": "B/s", "started_at": "t0", "ended_at": "t1"}


def plain_sample(**fields):
    """A Sample of `fields`, the others plain (PLAIN_SAMPLE): a test names only the fields it looks at."""
    from iolab.measures.samples import Sample

    return Sample(**(PLAIN_SAMPLE | fields))


def sample(campaign: str, run_id: str, value: float, host: str = "localhost", day: str = "2026-11-21", **kw):
    """A sample of seq's read_bw on tmpfs as a campaign stores it (the results index's tests); `kw` overrides."""
    fields = {
        "backend": "tmpfs",
        "workload": "seq",
        "params": {"profile": "seq-read-1m"},
        "metadata": {"validity": {"valid": True, "flags": [], "reasons": []}},
        "started_at": f"{day}T06:00:00.000000Z",
        "ended_at": f"{day}T06:00:10.000000Z",
    }
    return plain_sample(campaign=campaign, run_id=run_id, value=value, host=host, **(fields | kw))


def record(run_id: str, status: str = "ok", host: str = "localhost") -> dict:
    """A run record as record.run_record writes it."""
    return {"run_id": run_id, "host": host, "backend": "tmpfs", "workload": "seq", "repetition": 1, "status": status}


CHROMIUM = shutil.which("chromium")  # Debian's; it renders the HTML report in its tests


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium, nothing fetched, its profile under `tmp_path`."""
    assert CHROMIUM is not None
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def probed(tmp_path: Path, page: Path, script: str, *args: str) -> dict:
    """What `script` (a <script> that sets the body's data-probe to JSON) measured of `page` as Chromium laid it
    out; `args` are Chromium's (a window's size)."""
    copy = tmp_path / f"probe-{page.parent.name}.html"
    copy.write_text(page.read_text().replace("</body>", script + "</body>"))
    done = chromium(tmp_path, *args, "--dump-dom", copy.as_uri())
    match = re.search(r"data-probe=\"([^\"]*)\"", done.stdout)
    assert match, f"chromium gave no DOM: {done.stderr[-2000:]}"
    return json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
