"""The campaign loop's own cost: a fio-only campaign on localhost, Σ(runtime + ramp) / wall time.

    .venv/bin/python bench/run_loop.py [--rounds 3] [--inventory inventory/local.yml] [--hosts gpu01]
    .venv/bin/python bench/run_loop.py --six --inventory inventory/sim.yml --hosts 'gpu[01-04]'
    .venv/bin/python bench/run_loop.py --scale 1,2,4,8 --inventory inventory/sim.yml [--rounds 1]

The campaign is the quick campaign's fio part, as its target was set: two backends
(tmpfs, local disk), three fio profiles, three repetitions: 18 runs of 5 s + 1 s ramp, 108 s of
fio. Everything else in the wall time (Ansible, mounting, dropping caches, starting together,
bringing the results back, storing them) is the harness. A first, unmeasured call sets the
hosts up. Prints each round's wall time and efficiency, then the median. `--six`: the 6-run
campaign of the fan-out's target (tmpfs only, two repetitions), to compare 1 host with 4.
`--scale`: that 6-run campaign on gpu01..gpuN for each N, with what the controller spent per run
(CPU seconds of the `./lab` process tree and of the SSH connection masters it holds open), its peak
memory (the same processes' RSS, sampled 4 times a second), the SSH masters open, and the bytes
each run brought back per host: the measured costs docs/PERFORMANCE.md projects to 64 and 256 hosts.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path

import yaml
from _common import lab, samples

RUNTIME, RAMP, REPETITIONS = 5, 1, 3
PROFILES = ["seq-read-1m", "rand-read-16k", "imagenet-bssplit"]


def campaign(directory: Path, six: bool) -> Path:
    backends = [
        {"name": "bench-loop-mem", "type": "tmpfs", "size": "1GiB"},
        {"name": "bench-loop-disk", "type": "local", "path": "/var/tmp"},
    ]
    data = {
        "name": "bench-run-loop",
        "repetitions": 2 if six else REPETITIONS,
        "backends": backends[:1] if six else backends,
        "workloads": [
            {"name": p, "type": "fio", "profile": p, "runtime": f"{RUNTIME}s", "ramp": f"{RAMP}s", "size": "512MiB"}
            for p in PROFILES
        ],
    }
    path = directory / "campaign.yml"
    path.write_text(yaml.safe_dump(data))
    return path


TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> tuple[int, float, int, str] | None:
    """(parent PID, CPU seconds, RSS bytes, command name) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, fields = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, int(fields[21]) * PAGE, name


def _is_master(cmdline: bytes) -> bool:
    return cmdline.startswith(b"ssh: ") and b"[mux]" in cmdline


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


class Controller:
    """What the controller spends while `./lab` runs: the CPU of its process tree (exact, from the kernel's
    accounting of reaped children) plus the SSH masters' (sampled), and the peak RSS of both (sampled).

    `serial`: the part spent in one process at a time, which more cores do not spread: iolab's own
    process and each ansible-playbook's main process (its strategy loop, results and callbacks); the
    rest is Ansible's per-host workers, the SSH clients and masters (up to `forks` at once).
    """

    def __init__(self) -> None:
        self.masters_cpu: dict[int, tuple[float, float]] = {}  # pid: (first seen, last seen) CPU seconds
        self.peak_rss = 0
        self.masters = 0
        self.started = False  # a master first seen after the start is new: its CPU counts from 0
        self.own: dict[int, float] = {}  # iolab's process and the ansible-playbook main processes: own CPU seconds
        self.stop = threading.Event()

    def sample(self) -> None:
        parents: dict[int, tuple[int, float, int, str]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (stat := _stat(int(entry.name))):
                parents[int(entry.name)] = stat
        tree, me = set(), os.getpid()
        for pid in parents:
            chain, seen = pid, set()
            while chain in parents and chain not in seen:
                seen.add(chain)
                if parents[chain][0] == me:
                    tree.add(pid)
                    break
                chain = parents[chain][0]
        for pid in tree:
            parent = parents[pid][0]
            if parent == me or (parents.get(parent, (0,))[0] == me and b"ansible-playbook" in _cmdline(pid)):
                self.own[pid] = parents[pid][1]
        # The SSH connection masters (ControlPersist) open on this machine: Ansible's to the hosts.
        masters = {pid for pid, s in parents.items() if s[3] == "ssh" and _is_master(_cmdline(pid))}
        for pid in masters:
            first = self.masters_cpu.get(pid, (0.0 if self.started else parents[pid][1], 0.0))[0]
            self.masters_cpu[pid] = (first, parents[pid][1])
        # The masters this call used: those it started, and those of an earlier call whose CPU time grew.
        self.masters = sum(last > first for first, last in self.masters_cpu.values())
        self.peak_rss = max(self.peak_rss, sum(parents[pid][2] for pid in tree | masters))

    def __enter__(self) -> Controller:
        self.children = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.sample()
        self.started = True
        threading.Thread(target=self._poll, daemon=True).start()
        return self

    def _poll(self) -> None:
        while not self.stop.wait(0.25):
            self.sample()

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.sample()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu = after.ru_utime + after.ru_stime - self.children.ru_utime - self.children.ru_stime
        self.cpu += sum(last - first for first, last in self.masters_cpu.values())
        self.serial = sum(self.own.values())


def scale(path: Path, work: Path, inventory: str, counts: list[int], rounds: int) -> None:
    """The 6-run campaign on gpu01..gpuN for each N: wall, overhead and controller costs per run."""
    measured = len(PROFILES) * 2 * (RUNTIME + RAMP)
    lab("lab.setup", "--inventory", inventory, "--hosts", f"gpu[01-{max(counts):02d}]", results=work / "setup")
    print(
        "hosts | wall s | overhead s/run | controller CPU s/run (serial) | peak RSS MiB | SSH masters | "
        "KiB back/run/host"
    )
    for number in range(1, rounds + 1):
        for count in counts:
            results = work / f"scale-{count}-{number}"
            hosts = "gpu01" if count == 1 else f"gpu[01-{count:02d}]"
            with Controller() as controller:
                time.sleep(0.3)
                wall, _ = lab(
                    "bench.all", "--campaign", str(path), "--inventory", inventory, "--hosts", hosts, results=results
                )
            runs = {s["run_id"] for s in samples(results, "bench-run-loop")}
            back = sum(f.stat().st_size for f in (results / "bench-run-loop" / "raw").rglob("*") if f.is_file())
            print(
                f"{count} | {wall:.1f} | {(wall - measured) / len(runs):.2f} | {controller.cpu / len(runs):.2f} "
                f"({controller.serial / len(runs):.2f}) | "
                f"{controller.peak_rss / 2**20:.0f} | {controller.masters} | {back / len(runs) / count / 1024:.0f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--inventory", default="inventory/local.yml")
    parser.add_argument("--hosts", default="")
    parser.add_argument("--six", action="store_true", help="6 runs on one tmpfs backend")
    parser.add_argument("--scale", help="host counts, e.g. 1,2,4,8: the 6-run campaign on gpu01..gpuN each")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iolab-bench-loop-"))
    path = campaign(work, opts.six or bool(opts.scale))
    if opts.scale:
        scale(path, work, opts.inventory, [int(n) for n in opts.scale.split(",")], opts.rounds)
        return
    where = ["--inventory", opts.inventory] + (["--hosts", opts.hosts] if opts.hosts else [])
    measured = (1 if opts.six else 2) * len(PROFILES) * (2 if opts.six else REPETITIONS) * (RUNTIME + RAMP)
    lab("lab.setup", *where, results=work / "setup")
    efficiencies = []
    for number in range(1, opts.rounds + 1):
        results = work / f"round-{number}"
        wall, _ = lab("bench.all", "--campaign", str(path), *where, results=results)
        runs = {s["run_id"] for s in samples(results, "bench-run-loop")}
        efficiencies.append(measured / wall)
        print(
            f"round {number}: {len(runs)} runs, {measured} s of fio in {wall:.1f} s wall: "
            f"efficiency {measured / wall:.3f}, harness {(wall - measured) / len(runs):.2f} s per run",
            flush=True,
        )
    print(
        f"efficiency median {statistics.median(efficiencies):.3f} "
        f"(min {min(efficiencies):.3f}, max {max(efficiencies):.3f}, n={len(efficiencies)}); target ≥ 0.80"
    )


if __name__ == "__main__":
    main()
