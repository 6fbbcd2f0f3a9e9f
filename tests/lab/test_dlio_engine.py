"""engine: dlio: DLIO itself, one MPI job over two simulated hosts, beside iolab's emulation on the same files; and
on a host whose virtualenv is made from scratch by the campaign's own provisioning."""

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


# retinanet's JPEGs read by emulated B200s, small: each test's workloads are this.
EMULATED = {
    "type": "pytorch",
    "reader": "pil",
    "workers": 1,
    "batch_size": 4,
    "accelerator": {"type": "b200", "model": "retinanet"},
}


def test_dlio_runs_under_mpi_on_two_hosts_and_lands_beside_iolab(sim_hosts, cli, tmp_path):
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
    cli("bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu01,gpu02", "--campaign", str(path))
    samples = cli.samples("lab-dlio")
    au = {(s["params"].get("engine", "iolab"), s["host"]): s for s in samples if s["metric"] == "au"}
    assert set(au) == {(engine, host) for engine in ("iolab", "dlio") for host in ("gpu01", "gpu02")}
    dlio = {host: au["dlio", host]["metadata"] for host in ("gpu01", "gpu02")}
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
    # Nothing of this campaign stays mounted (another test's mount may be in a host's namespace: LAB_PITFALLS).
    assert not any("itest-dlio" in mounts for mounts in sim_hosts.mounts_left().values())


# A fresh host, seen by this test alone: its virtualenv and releases are fresh directories bind-mounted over
# /opt/iolab/venv and /opt/iolab/releases, in the simulated host's mount namespace and in a private one for the
# campaign's command (whose controller runs pip for the simulated hosts). The machine's own /opt/iolab, which every
# other session's hosts share, is not touched; leases and run directories stay the machine's.
FRESH_PARTS = ("venv", "releases")
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
def fresh_host(sim_hosts) -> Iterator[tuple[Path, str]]:
    """gpu01 with an empty virtualenv and release directory (the fresh directory, the host's name)."""
    host = sim_hosts.hosts[0]
    fresh = Path(tempfile.mkdtemp(prefix="iolab-fresh-host-"))
    for part in FRESH_PARTS:
        (fresh / part).mkdir()
        Path("/opt/iolab", part).mkdir(parents=True, exist_ok=True)  # the mount points
    mounts = " && ".join(f"mount --bind {shlex.quote(str(fresh / p))} /opt/iolab/{p}" for p in FRESH_PARTS)
    sim_hosts.ssh(host, mounts)
    try:
        yield fresh, host.name
    finally:
        points = " ".join(f"/opt/iolab/{p}" for p in FRESH_PARTS)
        sim_hosts.ssh(host, f"umount {points} || umount -l {points}", check=False)
        shutil.rmtree(fresh, ignore_errors=True)


def test_dlio_runs_on_a_host_whose_virtualenv_its_own_provisioning_made(sim_hosts, fresh_host, results, tmp_path):
    """Defect 2 of issue 37: DLIO imports TensorFlow at start; a virtualenv made by provisioning alone lacked it and
    every DLIO run failed (the controller's and the machine's virtualenvs had it from other workloads). Untraced."""
    fresh, host = fresh_host
    data = {
        "name": "lab-dlio-fresh",
        "backends": [{"name": "itest-dliofresh", "type": "tmpfs", "size": "32MiB"}],
        "dataset": {"kind": "retinanet", "files": 16, "seed": 5, "classes": 2},
        "workloads": [{"name": "dlio", **EMULATED, "engine": "dlio"}],
    }
    path = tmp_path / "fresh.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    cli = FreshHostCli(results, fresh)
    cli("bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", host, "--campaign", str(path))
    # The campaign made the virtualenv (it was an empty directory) and put in it what DLIO imports.
    python = fresh / "venv" / "bin" / "python"
    versions = "import importlib.metadata as m; print(m.version('tensorflow-cpu'), m.version('dlio-benchmark'))"
    assert subprocess.run([python, "-c", versions], capture_output=True, text=True, check=True).stdout.split() == [
        "2.21.0",
        "2.0.0",
    ]
    au = [s for s in cli.samples("lab-dlio-fresh") if s["metric"] == "au" and s["host"] == host]
    assert len(au) == 1 and au[0]["params"]["engine"] == "dlio"
    # Untraced by default, as MLPerf Storage's submitters run DLIO: no pydftracer trace among the run's files.
    assert au[0]["params"]["dlio_trace"] is False
    raw = results / "lab-dlio-fresh" / "raw"
    assert list(raw.rglob("*_output.json")) and not list(raw.rglob("trace-*.pfw"))
    logs = [*raw.rglob("stderr.txt"), *raw.rglob("stdout.txt"), *raw.rglob("dlio.log")]
    assert logs and not any("Profiling DLIO" in p.read_text(errors="replace") for p in logs)
    assert json.loads(next(raw.rglob("iolab.json")).read_text())["dlio_version"] == "2.0.0"
    assert not any("itest-dliofresh" in mounts for mounts in sim_hosts.mounts_left().values())
