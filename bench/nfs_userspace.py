"""NFS against local disk and tmpfs in one campaign, on a host whose kernel has no NFS client: the nfs backend
mounts a lab in a box's nfs-ganesha export with iolab's userspace client (nfs-rs over FUSE), chosen by itself.

    sudo .venv/bin/python bench/nfs_userspace.py [--repeat 2] [--runtime 10]

Each campaign (run `--repeat` times, a new campaign each time, the box kept): fio seq-read-1m, rand-read-16k and
imagenet-bssplit (libaio, direct, the profiles' queue depths; the page cache dropped before each run) and the
PyTorch loader (packed reader, 2 workers, no compute: the storage's pace) on the three backends. Prints each
figure per backend with the client the samples name, for docs/PERFORMANCE.md. Only one nfs-ganesha may run on
this machine: not while a test session's box serves NFS.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _common import ROOT, lab, samples, write_campaign

sys.path.insert(0, str(ROOT / "tests"))
from labbox import lab_box  # noqa: E402  (the tests' lab in a box: free ports, its own directory, torn down after)

SHOWN = {  # (workload, metric): how it is said; B/s in MiB/s, ns in ms
    ("seq", "read_bw"): "seq-read-1m {:.0f} MiB/s",
    ("rand16k", "read_iops"): "rand-read-16k {:.0f} IOPS",
    ("rand16k", "read_clat_p99"): "p99 {:.1f} ms",
    ("bssplit", "read_bw"): "imagenet-bssplit {:.0f} MiB/s",
    ("train", "samples_per_s"): "loader {:.0f} samples/s",
}


def campaign(name: str, box, local_dir: str, runtime: int) -> dict:
    server = box.nfs_server()
    fio = {"type": "fio", "runtime": f"{runtime}s", "ramp": "2s", "size": "256MiB"}
    return {
        "name": name,
        "backends": [
            {
                "name": f"{name}-nfs",
                "type": "nfs",
                "server": server["address"],
                "export": server["pseudo_path"],
                "version": 3,
                "port": server["port"],
                "mount_port": server["mount_port"],
            },
            {"name": f"{name}-local", "type": "local", "path": local_dir},
            {"name": f"{name}-mem", "type": "tmpfs", "size": "1GiB"},
        ],
        "dataset": {"kind": "imagenet-like", "files": 2000, "seed": 46, "classes": 10},
        "workloads": [
            {**fio, "name": "seq", "profile": "seq-read-1m"},
            {**fio, "name": "rand16k", "profile": "rand-read-16k"},
            {**fio, "name": "bssplit", "profile": "imagenet-bssplit"},
            {"name": "train", "type": "pytorch", "reader": "packed", "workers": 2, "batch_size": 32, "epochs": 1},
        ],
    }


def show(found: list[dict], name: str) -> None:
    for backend in (f"{name}-nfs", f"{name}-local", f"{name}-mem"):
        said, clients = [], set()
        for (workload, metric), text in SHOWN.items():
            values = [
                s
                for s in found
                if (s["backend"], s["workload"], s["metric"], s["host"]) == (backend, workload, metric, "localhost")
            ]
            for s in values:
                mount = s["metadata"].get("host", {}).get("mount", {})
                clients.add(mount.get("iolab", {}).get("client") or mount.get("fstype"))
                scale = {"B/s": 2**20, "ns": 1e6}.get(s["unit"], 1)
                said.append(text.format(s["value"] / scale))
        print(f"  {backend} ({', '.join(sorted(c for c in clients if c))}): " + ", ".join(said))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2, help="campaigns one after another (default 2)")
    parser.add_argument("--runtime", type=int, default=10, help="seconds of each fio run after its ramp (default 10)")
    parser.add_argument("--bind", default="127.0.0.1", help="the box's address (default 127.0.0.1)")
    args = parser.parse_args()
    results = Path(tempfile.mkdtemp(prefix="iolab-bench-nfs-"))
    local_dir = Path(tempfile.mkdtemp(prefix="iolab-bench-nfs-local-", dir="/var/tmp"))
    with lab_box(args.bind) as bare:
        box = bare.ensure("nfs")
        for attempt in range(1, args.repeat + 1):
            name = f"bnfs{attempt}"
            path = write_campaign(campaign(name, box, str(local_dir), args.runtime))
            seconds, done = lab("bench.all", "--campaign", str(path), results=results, check=False)
            print(f"campaign {attempt}/{args.repeat}: {seconds:.0f} s, exit {done.returncode}")
            if done.returncode != 0:
                sys.exit(done.stdout[-2000:] + done.stderr[-2000:])
            show(samples(results, name), name)
    print(f"results: {results}")


if __name__ == "__main__":
    main()
