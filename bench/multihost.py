"""Fan-out cost on simulated hosts: a fio campaign on 1, 4, 16 and 32 hosts, and one through a gateway.

For each host count N: a one-run campaign and an R-run campaign (fio, --runtime s, --size files, tmpfs),
each after a one-run campaign on the same hosts that is not measured (the first provisioning, the first ssh
connections), so that the fixed cost (provisioning, mount, unmount: Ansible plays) cancels out of the per-run
figures:

    wall per run                 (wall of R runs − wall of 1 run) / (R − 1)
    controller CPU per run/host  (CPU of R runs − CPU of 1) / (R − 1) / N; the CPU of `./lab` and what it
                                 waited for (ansible-playbook, ssh) plus the lab's ssh control masters
    host CPU per run/host        the same for every process of the simulated hosts (their network namespaces:
                                 sshd, sessions, hostrun, fio, Ansible's modules, a gateway's ClusterShell),
                                 the side real hosts run on cores of their own
    start skew                   each run's aggregate start_late_max_s (the latest host after T) and
                                 start_spread_s (latest − earliest)
    bytes back                   the run's files per host as unpacked on the controller (raw/<run>/<host>/)
    where a run's time goes      from each host's run.json (median over the R runs, the latest host each):
                                 reach (its hostrun started, after the first host's), prepare (hostrun's
                                 start to ready: fio's prepare, its cache drop), ready→T (the last ready host
                                 to the common start: the controller's start line and its notice), tool (T
                                 to fio's end)

and the R-run campaign's wall against one host's (the issue's target: ≤ 1.5 at 16 hosts, the 6-run
campaign at 4 hosts ≤ 1.15). `--gateway`: the R-run campaign once more on the largest count, gpu01 the
ClusterShell gateway to the others (a topology file). A lab of its own (root: network namespaces), taken
down after.

    .venv/bin/python bench/multihost.py [--counts 1,4,16,32] [--runs 4] [--runtime 3] [--gateway]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml
from _common import lab, samples  # puts this checkout's pyfiles on the path

from iolab import sim
from iolab.shared import processes


def cpu_of(selected: Callable[[Path], bool], with_reaped: bool = False) -> float:
    """CPU seconds of this machine's processes that `selected` picks (given /proc/PID), and with `with_reaped`
    those of the children they reaped."""
    last = 15 if with_reaped else 13  # /proc/PID/stat after the name: utime, stime, then cutime, cstime at 11..14
    ticks = 0
    for proc in Path("/proc").iterdir():
        try:
            if selected(proc):
                ticks += sum(int(f) for f in (proc / "stat").read_text().rsplit(")", 1)[1].split()[11:last])
        except (OSError, IndexError, ValueError):
            continue
    return ticks / processes.HZ


def cpu_of_masters(lab_dir: Path) -> float:
    """CPU seconds of the ssh control masters of the lab (daemons: no one waits for them)."""
    return cpu_of(lambda proc: b"[mux]" in (cmd := (proc / "cmdline").read_bytes()) and str(lab_dir).encode() in cmd)


def cpu_of_hosts(namespaces: list[str]) -> float:
    """CPU seconds of every process in the simulated hosts' network namespaces (their sshd, sessions, hostrun,
    fio, Ansible's modules) with what they reaped: the hosts' side, which real hosts run on cores of their own."""
    inodes = {f"net:[{os.stat(f'/run/netns/{namespace}').st_ino}]" for namespace in namespaces}
    return cpu_of(lambda proc: os.readlink(proc / "ns" / "net") in inodes, with_reaped=True)


def campaign(directory: Path, name: str, runs: int, opts: argparse.Namespace) -> Path:
    fio = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": f"{opts.runtime:g}s", "ramp": "0s"}
    data = {
        "name": name,
        "repetitions": runs,
        "backends": [{"name": "bench-fanout", "type": "tmpfs", "size": "96MiB"}],
        "workloads": [{**fio, "size": opts.size}],
    }
    path = directory / f"{name}.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# A run's phases from its hosts' run.json (hostrun run --start-when-told's timeline), the latest host each.
PHASES = {
    "reach": lambda rs: max(r["called_at"] for r in rs) - min(r["called_at"] for r in rs),
    "prepare": lambda rs: max(r["ready_at"] - r["called_at"] for r in rs),
    "ready→T": lambda rs: rs[0]["start_at"] - max(r["ready_at"] for r in rs),
    "tool": lambda rs: max(r["ended_at"] for r in rs) - rs[0]["start_at"],
}


def measure(
    inventory: Path, hosts: int, runs: int, opts, work: Path, lab_dir: Path, tag: str, namespaces: list[str]
) -> dict:
    """Run an R-run campaign on `hosts` hosts; its wall, controller and hosts' CPU, start skews and bytes back."""
    results = work / f"results-{tag}"
    name = f"bench-fanout-{tag}"
    path = campaign(work, name, runs, opts)
    before_children, before_masters, before_hosts = os.times(), cpu_of_masters(lab_dir), cpu_of_hosts(namespaces)
    pattern = "gpu01" if hosts == 1 else f"gpu[01-{hosts:02d}]"
    wall, _ = lab(
        "bench.all", "--inventory", str(inventory), "--hosts", pattern, "--campaign", str(path), results=results
    )
    after = os.times()
    cpu = after.children_user + after.children_system - before_children.children_user - before_children.children_system
    cpu += cpu_of_masters(lab_dir) - before_masters
    host_cpu = cpu_of_hosts(namespaces) - before_hosts
    aggregates = [s for s in samples(results, name) if s["host"] == "*" and s["metric"] == "read_bw"]
    raw = results / name / "raw"
    files = [f for f in raw.rglob("*") if f.is_file()]
    timelines = [[json.loads(f.read_text()) for f in run.glob("*/run.json")] for run in raw.iterdir()]
    return {
        "phases": {name: statistics.median(phase(records) for records in timelines) for name, phase in PHASES.items()},
        "wall": wall,
        "cpu": cpu,
        "host_cpu": host_cpu,
        "late": [s["metadata"]["start_late_max_s"] for s in aggregates],
        "spread": [s["metadata"]["start_spread_s"] for s in aggregates],
        "bytes": sum(f.stat().st_size for f in files) / max(1, runs * hosts),
    }


def report(hosts: int, one: dict, many: dict, runs: int, base: float | None, gated: bool = False) -> None:
    per_run = (many["wall"] - one["wall"]) / (runs - 1)
    cpu = (many["cpu"] - one["cpu"]) / (runs - 1) / hosts
    host_cpu = (many["host_cpu"] - one["host_cpu"]) / (runs - 1) / hosts
    late = max(many["late"], default=0.0) * 1000
    spread = max(many["spread"], default=0.0) * 1000
    ratio = f"{many['wall'] / base:.2f}" if base else "—"
    print(
        f"{hosts:>5}{' (gw)' if gated else '     '}  {many['wall']:8.1f} s  {ratio:>6}  {per_run:7.2f} s  "
        f"{cpu:8.3f} s  {host_cpu:8.3f} s  {late:7.1f} ms  {spread:7.1f} ms  {many['bytes'] / 1024:8.0f} KiB   "
        + "  ".join(f"{name} {seconds:.2f} s" for name, seconds in many["phases"].items())
    )


def gated_inventory(inventory: Path, work: Path, hosts: int) -> Path:
    topology = work / "topology.conf"
    root = socket.gethostname().split(".")[0]
    topology.write_text(f"[routes]\n{root}: gpu01\ngpu01: gpu[02-{hosts:02d}]\n")
    data = yaml.safe_load(inventory.read_text())
    data["all"]["children"]["gpu"]["vars"].update(
        {"iolab_topology": str(topology), "iolab_gateway_python": sys.executable}
    )
    path = work / "gated.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", default="1,4,16,32", help="host counts (default 1,4,16,32)")
    parser.add_argument("--runs", type=int, default=4, help="runs of the campaign (default 4)")
    parser.add_argument("--runtime", type=float, default=3, help="fio's timed part, s (default 3)")
    parser.add_argument("--size", default="32MiB", help="fio's file per host (default 32MiB)")
    parser.add_argument("--gateway", action="store_true", help="also the campaign through a gateway (largest count)")
    opts = parser.parse_args()
    counts = [int(c) for c in opts.counts.split(",")]
    work = Path(tempfile.mkdtemp(prefix="iolab-bench-fanout-", dir="/tmp"))
    simlab = sim.Lab(name=f"b{os.getpid()}"[:8], dir=work / "lab", inventory=work / "lab" / "sim.yml")
    try:
        sims = sim.up(max(counts), simlab)
        print(f"fio seq-read-1m, {opts.runtime:g} s, {opts.size} per host, tmpfs; {opts.runs}-run campaign vs 1-run")
        print(
            "hosts         wall R   ×1 host   wall/run   CPU/run/host  host CPU/run/host  late max   spread  "
            "bytes/host/run   "
            "where a run's time goes (median run, latest host)"
        )
        namespaces = [host.namespace for host in sims]

        def one_and_many(inventory: Path, hosts: int, suffix: str = "") -> tuple[dict, dict]:
            """An unmeasured 1-run campaign on `hosts` hosts, then the measured 1-run and R-run ones."""

            def of(runs: int, tag: str) -> dict:
                return measure(inventory, hosts, runs, opts, work, simlab.dir, f"{hosts}-{tag}{suffix}", namespaces)

            of(1, "warm-up")  # not measured
            return of(1, "1"), of(opts.runs, str(opts.runs))

        base = None
        for hosts in counts:
            one, many = one_and_many(simlab.inventory, hosts)
            base = base or (many["wall"] if hosts == 1 else None)
            report(hosts, one, many, opts.runs, base)
        if opts.gateway:
            hosts = max(counts)
            one, many = one_and_many(gated_inventory(simlab.inventory, work, hosts), hosts, "-gw")
            report(hosts, one, many, opts.runs, base, gated=True)
    finally:
        sim.down(simlab)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
