"""Storage that breaks during the test, in full: what the clients felt when the lab's only OSD stopped, on a lab in
a box of this machine's own (real Ceph, real radosgw, bench.all on localhost).

    sudo .venv/bin/python bench/storage_faults.py [--repeat 2]

One campaign, run `--repeat` times (a new campaign each time, the box kept): fio through librbd and on CephFS with
the OSD stopped at 10 s and started at 30 s (55 s runs), the PyTorch loader on CephFS (a data set larger than
ceph-fuse's object cache) with it stopped from 25 s to 35 s, and S3 objects with radosgw stopped from 15 s to
22 s. Prints, per run, the baseline, the mean rate while degraded, the floor (the lowest second in % of the
baseline), the time back to 90 % after the injection and after the heal, the clients' errors, the cluster's time to
HEALTH_OK, the loader's AU inside the fault window and the data set's check after the fault.

The CI's test (tests/integration/test_storage_faults.py) runs CephFS, the loader and S3 with shorter windows;
this is the whole scenario, RBD included, for docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _common import ROOT, lab, samples, write_campaign

sys.path.insert(0, str(ROOT / "tests"))
from labbox import lab_box  # noqa: E402  (the tests' lab in a box: free ports, its own directory, torn down after)

OSD_STOP = {"what": "osd_stop", "osd": 0}
FIO = {"type": "fio", "profile": "seq-read-1m", "runtime": "55s", "ramp": "1s", "size": "64MiB"}
SHOWN = (  # (metric, params' after, how it is said; rates in B/s are said in MiB/s)
    ("read_bw_baseline", None, "baseline {} MiB/s"),
    ("samples_per_s_baseline", None, "baseline {} samples/s"),
    ("read_bw_degraded", None, "{} MiB/s while degraded"),
    ("floor_pct", None, "floor {} % of the baseline"),
    ("time_to_90pct", "injection", "back to 90 % {} s after the injection"),
    ("time_to_90pct", "heal", "{} s after the heal"),
    ("client_errors", None, "client errors {}"),
    ("time_to_health_ok", None, "HEALTH_OK after {} s"),
    ("fault_au", None, "AU in the fault window {} %"),
    ("data_errors", None, "data errors {}"),
)


def campaign(name: str, box) -> dict:
    ceph = box.ceph_fields()
    return {
        "name": name,
        "backends": [
            {"name": f"{name}-blk", "type": "rbd", "size": "64MiB", "image": f"{name}-blk", **ceph},
            {"name": f"{name}-fs", "type": "cephfs", "method": "fuse", **ceph},
            {"name": f"{name}-obj", "type": "s3", "prefix": name, **box.s3_fields()},
        ],
        # ≈ 330 MB: more than ceph-fuse's own object cache (client_oc_size, 200 MiB), which kept a 300-file set
        # (33 MB) readable through the stop (docs/LAB_PITFALLS.md)
        "dataset": {"kind": "imagenet-like", "files": 3000, "seed": 36, "classes": 6},
        "workloads": [
            {**FIO, "name": "rd", "faults": [{"at": "10s", "heal_at": "30s", **OSD_STOP}]},
            {  # 100 ms of compute per batch of 10: at most 100 samples/s, 30 s and more an epoch
                "name": "train",
                "type": "pytorch",
                "reader": "packed",
                "workers": 1,
                "batch_size": 10,
                "epochs": 2,
                "accelerator": {"type": "custom", "compute_per_batch": "100ms"},
                "faults": [{"at": "25s", "heal_at": "35s", **OSD_STOP}],
            },
            {
                "name": "obj",
                "type": "objects",
                "size": "1MiB",
                "threads": 4,
                "objects": 16,
                "runtime": "25s",
                "faults": [{"at": "15s", "what": "rgw_stop", "heal_at": "22s"}],
            },
        ],
    }


def show(found: list[dict]) -> None:
    # the aggregate's figures, and the host's own where the aggregate has none (the loader's AU in the window)
    faulted = sorted((s for s in found if "faults" in s["metadata"]), key=lambda s: s["host"] == "*")
    for key in sorted({(s["backend"], s["workload"]) for s in faulted}):
        figures = {
            (s["metric"], s["params"].get("after")): s["value"] / (2**20 if s["unit"] == "B/s" else 1)
            for s in faulted
            if (s["backend"], s["workload"]) == key
        }
        said = [text.format(f"{figures[(m, a)]:.0f}") for m, a, text in SHOWN if (m, a) in figures]
        print(f"  {key[1]} on {key[0]}: " + ", ".join(said))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2, help="campaigns one after another (default 2)")
    parser.add_argument("--bind", default="127.0.0.1", help="the box's address (default 127.0.0.1)")
    args = parser.parse_args()
    results = Path(tempfile.mkdtemp(prefix="iolab-bench-faults-"))
    with lab_box(args.bind) as bare:
        box = bare.ensure("ceph")  # RBD, CephFS and radosgw (the box starts what it is asked for)
        for attempt in range(1, args.repeat + 1):
            name = f"bfault{attempt}"
            path = write_campaign(campaign(name, box))
            seconds, done = lab("bench.all", "--campaign", str(path), results=results, check=False)
            print(f"campaign {attempt}/{args.repeat}: {seconds:.0f} s, exit {done.returncode}")
            if done.returncode != 0:
                sys.exit(done.stdout[-2000:] + done.stderr[-2000:])  # the box's teardown removes its image
            box.rbd("rm", f"{box.ceph_client()['rbd_pool']}/{name}-blk")
            show(samples(results, name))
            box.wait_settled()  # the cluster healthy again between campaigns
    print(f"results: {results}")


if __name__ == "__main__":
    main()
