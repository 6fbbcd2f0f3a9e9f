"""engine: dlio: DLIO itself, one MPI job over two simulated hosts whose virtualenv the campaign's own provisioning
made from scratch, beside iolab's emulation on the same files (one DLIO campaign: DLIO's runs belong in bench/)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from support import Cli

pytestmark = pytest.mark.lab
pytest.importorskip("torch", reason="loader workloads need torch (pip install torch==2.13.0)")
if shutil.which("mpirun") is None:
    pytest.skip("engine dlio needs Open MPI's mpirun (apt-get install openmpi-bin)", allow_module_level=True)


# retinanet's JPEGs read by emulated B200s, small: the test's workloads are this.
EMULATED = {
    "type": "pytorch",
    "reader": "pil",
    "workers": 1,
    "batch_size": 4,
    "accelerator": {"type": "b200", "model": "retinanet"},
}


# Fresh hosts, seen by this test alone: their virtualenv and releases are fresh directories bind-mounted over
# /opt/iolab/venv and /opt/iolab/releases, in each simulated host's mount namespace (both hosts the same directories,
# as the hosts share /opt/iolab otherwise) and in a private one for the campaign's command (whose controller runs pip
# for the simulated hosts). The machine's own /opt/iolab, which every other session's hosts share, is not touched;
# leases and run directories stay the machine's.
FRESH_PARTS = ("venv", "releases")
FRESH_HOSTS = ("gpu01", "gpu02")
BIND_THEN_RUN = """
import os, subprocess, sys
for part in sys.argv[2].split(","):
    subprocess.run(["mount", "--bind", os.path.join(sys.argv[1], part), "/opt/iolab/" + part], check=True)
os.execvp(sys.argv[3], sys.argv[3:])
"""


class FreshHostCli(Cli):
    """`./lab TASK` in a mount namespace of its own where /opt/iolab's virtualenv and releases are `fresh`'s."""

    def __init__(self, results: Path, fresh: Path):
        super().__init__(results)
        self.fresh = fresh

    def argv(self, *args: str) -> list[str]:
        bind = [sys.executable, "-c", BIND_THEN_RUN, str(self.fresh), ",".join(FRESH_PARTS)]
        return ["unshare", "--mount", "--propagation", "private", "--", *bind, *super().argv(*args)]


@pytest.fixture
def fresh_hosts(sim_hosts) -> Iterator[Path]:
    """gpu01 and gpu02 with one empty virtualenv and release directory (the fresh directory)."""
    hosts = [h for h in sim_hosts.hosts if h.name in FRESH_HOSTS]
    fresh = Path(tempfile.mkdtemp(prefix="iolab-fresh-host-"))
    for part in FRESH_PARTS:
        (fresh / part).mkdir()
        Path("/opt/iolab", part).mkdir(parents=True, exist_ok=True)  # the mount points
    mounts = " && ".join(f"mount --bind {shlex.quote(str(fresh / p))} /opt/iolab/{p}" for p in FRESH_PARTS)
    bound = []
    try:
        for host in hosts:
            bound.append(host)
            sim_hosts.ssh(host, mounts)
        yield fresh
    finally:
        points = " ".join(f"/opt/iolab/{p}" for p in FRESH_PARTS)
        for host in bound:
            sim_hosts.ssh(host, f"umount {points} || umount -l {points}", check=False)
        shutil.rmtree(fresh, ignore_errors=True)


def test_dlio_runs_under_mpi_on_two_hosts_whose_virtualenv_its_own_provisioning_made(
    sim_hosts, fresh_hosts, results, tmp_path
):
    """One MPI job over two hosts, beside iolab's emulation on the same files, on hosts whose virtualenv was an
    empty directory. Defect 2 of issue 37: DLIO imports TensorFlow at start; a virtualenv made by provisioning alone
    lacked it and every DLIO run failed (the controller's and the machine's virtualenvs had it from other
    workloads). Untraced."""
    emulated = {**EMULATED, "accelerators": 2}
    data = {
        "name": "lab-dlio",
        "backends": [{"name": "itest-dlio", "type": "tmpfs", "size": "64MiB"}],
        # 32 JPEGs of MLPerf's retinanet size (≈320 KB) per host: 4 steps of each of the 4 ranks.
        "dataset": {"kind": "retinanet", "files": 32, "seed": 5, "classes": 2},
        "workloads": [
            {"name": "iolab", **emulated},
            {"name": "dlio", **emulated, "engine": "dlio"},
        ],
    }
    path = tmp_path / "dlio.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    cli = FreshHostCli(results, fresh_hosts)
    cli("bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", ",".join(FRESH_HOSTS), "--campaign", str(path))
    # The campaign made the virtualenv (it was an empty directory) and put in it what DLIO imports.
    python = fresh_hosts / "venv" / "bin" / "python"
    versions = "import importlib.metadata as m; print(m.version('tensorflow-cpu'), m.version('dlio-benchmark'))"
    assert subprocess.run([python, "-c", versions], capture_output=True, text=True, check=True).stdout.split() == [
        "2.21.0",
        "2.0.0",
    ]
    samples = cli.samples("lab-dlio")
    au = {(s["params"].get("engine", "iolab"), s["host"]): s for s in samples if s["metric"] == "au"}
    assert set(au) == {(engine, host) for engine in ("iolab", "dlio") for host in FRESH_HOSTS}
    dlio = {host: au["dlio", host]["metadata"] for host in FRESH_HOSTS}
    # One job of four ranks: gpu01 ran ranks 0 and 1 (and mpirun, so the job's summary), gpu02 ranks 2 and 3.
    assert [r["rank"] for r in dlio["gpu01"]["ranks"]] == [0, 1]
    assert [r["rank"] for r in dlio["gpu02"]["ranks"]] == [2, 3]
    summary = dlio["gpu01"]["dlio_summary"]
    assert summary["accelerators"] == 4 and summary["hosts"] == 2
    assert dlio["gpu02"]["dlio_summary"] is None and dlio["gpu01"]["engine"] == "dlio"
    # The hosts' AU, as DLIO counts it, is the job's that DLIO states.
    mean = (au["dlio", "gpu01"]["value"] + au["dlio", "gpu02"]["value"]) / 2
    assert mean == pytest.approx(summary["au_percent"], rel=1e-9)
    rates = {s["host"] for s in samples if s["metric"] == "samples_per_s" and s["params"].get("engine") == "dlio"}
    assert rates == {"gpu01", "gpu02", "*"}
    # Untraced by default, as MLPerf Storage's submitters run DLIO: no pydftracer trace among the run's files.
    assert all(au["dlio", host]["params"]["dlio_trace"] is False for host in FRESH_HOSTS)
    raw = results / "lab-dlio" / "raw" / au["dlio", "gpu01"]["run_id"]
    assert list(raw.rglob("*_output.json")) and not list(raw.rglob("trace-*.pfw"))
    logs = [*raw.rglob("stderr.txt"), *raw.rglob("stdout.txt"), *raw.rglob("dlio.log")]
    assert logs and not any("Profiling DLIO" in p.read_text(errors="replace") for p in logs)
    assert json.loads(next(raw.rglob("iolab.json")).read_text())["dlio_version"] == "2.0.0"
    # One call per host, as every kind's runs (the fan-out): mpirun on gpu01, gpu02's part waiting for its ranks.
    assert {json.loads(p.read_text())["launcher"] for p in raw.glob("gpu0[12]/run.json")} == {"clustershell"}
    # Nothing of this campaign stays mounted (another test's mount may be in a host's namespace: LAB_PITFALLS).
    assert not any("itest-dlio" in mounts for mounts in sim_hosts.mounts_left().values())
