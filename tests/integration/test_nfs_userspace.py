"""NFS measured on a host whose kernel has no NFS client (issue 46): the nfs backend mounts the session's lab box's
nfs-ganesha export with iolab's userspace client (nfs-rs over FUSE, iolab.host.nfs_fuse), chosen by itself, and fio
and the PyTorch loader run on it from this machine; the samples name the client. The lab's nfs-ganesha is stopped
under both (fault nfs_stop), and the figures are checked against fio's own per-second log.

On the worker whose box runs the machine's only nfs-ganesha (tests/conftest.py, ON_LAB_NFS); the campaign waits for
this machine's lease like the localhost tests' (test_storage_faults.bench).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from integration.test_storage_faults import LOADER, bench, figures

from support import mounted

pytestmark = pytest.mark.integration

NAME = "itest-nfsu"
CLIENT = "nfs-rs 0.8.7 (FUSE)"


def nfs_backend(box, name: str) -> dict:
    server = box.nfs_server()
    return {
        "name": name,
        "type": "nfs",
        "server": server["address"],
        "export": server["pseudo_path"],
        "version": 3,  # nfs-rs's NFSv4 LOOKUP of nfs-ganesha's pseudo path fails (docs/LAB_PITFALLS.md)
        "port": server["port"],
        "mount_port": server["mount_port"],
    }


def fio_log_back(series: list[tuple[float, float]], inject: float, heal: float) -> float | None:
    """Seconds from `heal` until fio's own per-second rate is back at 90 % of its median before `inject`: the first
    logged second that reaches it, after the lowest one since the injection (no smoothing, no filled gaps)."""
    before = [v for t, v in series if t <= inject - 1]
    level = 0.9 * statistics.median(before)
    after = [(t, v) for t, v in series if t > inject]
    low = min(range(len(after)), key=lambda i: after[i][1])
    back = next((t for t, v in after[low + 1 :] if v >= level and t > heal), None)
    return None if back is None else back - 1 - heal  # a logged second ends at t


def test_fio_and_a_loader_on_nfs_through_the_userspace_client_with_nfs_ganesha_stopped(nfs_box, cli, write_campaign):
    stop = {"what": "nfs_stop", "service_dir": str(nfs_box.nfs_dir)}
    campaign = write_campaign(
        {
            "name": NAME,
            "backends": [nfs_backend(nfs_box, f"{NAME}-nfs")],
            "dataset": {"kind": "imagenet-like", "files": 300, "seed": 46, "classes": 6},
            "workloads": [
                {
                    "name": "rd",
                    "type": "fio",
                    "profile": "seq-read-1m",
                    "runtime": "40s",
                    "ramp": "1s",
                    "size": "64MiB",
                    "faults": [{"at": "10s", "heal_at": "20s", **stop}],
                },
                {**LOADER, "faults": [{"at": "25s", "heal_at": "35s", **stop}]},
            ],
        }
    )
    bench(cli, campaign)
    assert mounted(f"/mnt/iolab/{NAME}") == []  # the FUSE client unmounted and ended
    assert not Path(f"/run/iolab/storage/localhost/{NAME}-nfs").exists()
    assert {r["status"] for r in cli.runs(NAME)} == {"ok"}
    samples = cli.samples(NAME)
    for workload in ("rd", "train"):  # each sample says which client read the export
        clients = {_client(s) for s in samples if s["workload"] == workload and s["host"] == "localhost"}
        assert clients == {CLIENT}, (workload, clients)

    found = figures(samples, f"{NAME}-nfs", "rd")
    assert found[("floor_pct", None)] < 10, found  # the reads stopped with the server
    assert found[("client_errors", None)] == 0
    from iolab.workloads import parser_for

    (sample,) = (s for s in samples if s["workload"] == "rd" and s["metric"] == "floor_pct" and s["host"] == "*")
    faults = sample["metadata"]["faults"]
    start = faults["start_at"]
    inject, heal = (start + t for t in faults["window_s"])
    series = parser_for("fio")(cli.results / NAME / "raw" / sample["run_id"] / "localhost").series["read_bw"]
    back = fio_log_back(series, inject, heal)
    if back is None:
        assert ("time_to_90pct", "heal") not in found, found
    else:
        assert found[("time_to_90pct", "heal")] == pytest.approx(max(0.0, back), abs=1), (found, back)
        assert found[("time_to_90pct", "injection")] == pytest.approx(heal - inject + max(0.0, back), abs=1)

    train = figures(samples, f"{NAME}-nfs", "train", "localhost")
    assert 0 <= train[("fault_au", None)] <= 100 and train[("samples_per_s_baseline", None)] > 0, train
    assert train[("data_errors", None)] == 0


def _client(sample: dict) -> str | None:
    """The client the sample's host facts name for the mount its tool read (the mount's record)."""
    mount = sample.get("metadata", {}).get("host", {}).get("mount", {})
    return mount.get("iolab", {}).get("client")
