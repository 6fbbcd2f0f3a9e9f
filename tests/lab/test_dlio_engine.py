"""engine: dlio: DLIO itself, one MPI job over two simulated hosts, beside iolab's emulation on the same files."""

from __future__ import annotations

import shutil

import pytest
import yaml

pytestmark = pytest.mark.lab
pytest.importorskip("torch", reason="loader workloads need torch (pip install torch==2.13.0)")
if shutil.which("mpirun") is None:
    pytest.skip("engine dlio needs Open MPI's mpirun (apt-get install openmpi-bin)", allow_module_level=True)


def test_dlio_runs_under_mpi_on_two_hosts_and_lands_beside_iolab(sim_hosts, cli, tmp_path):
    emulated = {
        "type": "pytorch",
        "reader": "pil",
        "workers": 1,
        "batch_size": 4,
        "accelerator": {"type": "b200", "model": "retinanet"},
        "accelerators": 2,
    }
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
