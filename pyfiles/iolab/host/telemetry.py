"""Host telemetry while a tool runs, once a second (host side, stdlib only).

    sampler = Sampler(run_dir / "telemetry.jsonl", tool_pid=proc.pid, after=2.0, target="/mnt/iolab/nvme")
    sampler.start()          # the window opens `after` seconds later (the tool's ramp)
    ...                      # the tool runs
    sampler.stop()           # the tool ended: one last, partial interval, then the end record

What each interval records, with the arithmetic of the usual tools:

- **disks** (`/proc/diskstats`, as sysstat's iostat computes it): r/s, w/s, bytes/s,
  average request size, r_await / w_await / await, aqu-sz (weighted time in queue
  over the interval) and %util (time with IO in flight over the interval); and
  the interval's raw deltas so that summaries over the run are exact sums rather
  than averages of averages. Partitions and RAM disks are left out, and so are
  loop, zram and nbd devices that never did any IO (a host has dozens of them);
  the devices under the target are always kept. Units: bytes and seconds.
- **CPU** by mode (`/proc/stat`), in cores; and the CPU of the tool's process tree:
  the tool and its descendants (`/proc/<pid>/stat`), plus what the processes this
  one has reaped used, so the tool's last second still counts after hostrun has
  collected its exit status; the tree's resident memory (the sum of its processes'
  RSS, in bytes: a page several of them map counts once for each, so an upper bound).
- **run queue**: `procs_running` of `/proc/stat` at the interval's end, less the
  sampler's own thread (running while it reads): tasks running or waiting for a CPU.
- **memory**: `Cached`, `Dirty`, `MemFree`, `Buffers`, `MemAvailable`, `MemTotal`
  (`/proc/meminfo`), in bytes.
- **network**: bytes per interface (`/proc/net/dev`), interfaces that never moved a byte left out.
- **GPUs**, through NVML (iolab.host.gpu_telemetry): per GPU, utilization and memory-controller
  utilization (%), memory used and total (B), SM clock (Hz), temperature (°C), power
  (W) and PCIe receive and transmit throughput (B/s), read once an interval by a thread
  of this process. Without NVML or a GPU, there are no GPU figures and the start record's
  `gpu` says why.

The file `telemetry.jsonl`, one JSON object a line, each written whole and at once:

    {"type": "start", "t": ..., "interval": 1.0, "after": 2.0, "target": {...}, "mem": {...},
     "gpu": {"source": "nvml", "count": 8, "driver": "...", "names": [...]} or {"absent": "why"},
     "cpus": 2, "boot_id": "...", ...}
    {"type": "sample", "t": ..., "dt": 1.0003, "disk": {"loop0": {...}}, "cpu": {...}, "tool": {...},
     "run_queue": 3, "mem": {...}, "net": {...}, "gpu": [...]}
    {"type": "end", "t": ..., "window_s": ..., "sampler_cpu_s": ..., "sampler_cpu_pct": ..., "errors": [...]}

`t` is seconds since the epoch at the end of the interval, `dt` the interval's
length from a monotonic clock. `boot_id` names the kernel: simulated hosts (network
namespaces of one machine) share it, and with it the CPU and memory figures, which are
then the whole machine's. The sampler's own cost is measured with its
threads' CPU clocks (`time.thread_time`), the NVML thread's included.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from iolab.host.gpu_telemetry import NVML_MODULE, GpuProbe, open_nvml
from iolab.shared import mountinfo as shared_mountinfo
from iolab.shared.processes import HZ, ToolTree

SCHEMA = "iolab.host.telemetry/1"
FILE = "telemetry.jsonl"
SECTOR = 512  # /proc/diskstats counts 512-byte sectors whatever the device's block size
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")  # guest is inside user
MEMINFO_KEYS = ("Cached", "Dirty", "MemFree", "Buffers", "MemAvailable", "MemTotal")
# Devices that exist by the dozen and matter only once used; RAM disks are memory, not storage.
IDLE_UNLESS_USED = ("loop", "zram", "nbd")
NEVER = ("ram",)
_U32 = 1 << 32


# --- /proc readers: text in, numbers out (pure, so tests can feed captured files) ---------------


class DiskCounters(NamedTuple):
    """One line of /proc/diskstats (Documentation/admin-guide/iostats.rst); times in ms."""

    r_ios: int
    r_merges: int
    r_sectors: int
    r_ms: int
    w_ios: int
    w_merges: int
    w_sectors: int
    w_ms: int
    in_flight: int
    busy_ms: int  # io_ticks: time with at least one IO in flight (%util)
    queue_ms: int  # time_in_queue: summed over IOs (aqu-sz)
    d_ios: int = 0  # discards, kernel >= 4.18
    d_merges: int = 0
    d_sectors: int = 0
    d_ms: int = 0
    f_ios: int = 0  # flushes, kernel >= 5.5
    f_ms: int = 0

    @property
    def used(self) -> bool:
        return bool(self.r_ios or self.w_ios or self.d_ios or self.f_ios)


def parse_diskstats(text: str) -> dict[str, DiskCounters]:
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 14:
            out[fields[2]] = DiskCounters(*map(int, fields[3:20]))
    return out


def _delta(before: int, after: int) -> int:
    """after - before for a kernel counter; the ms counters are 32-bit in diskstats and wrap."""
    diff = after - before
    if diff < 0:
        diff += _U32
        if not 0 <= diff < _U32 // 2:  # not a wrap: the device was re-created; count nothing
            return 0
    return diff


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def disk_interval(prev: DiskCounters, cur: DiskCounters, seconds: float) -> dict[str, float]:
    """One device over one interval, as sysstat's iostat -x computes it (rd_stats.c, iostat.c).

    r_s, w_s: IOs completed per second; rB_s, wB_s: bytes per second;
    r_size, w_size: average request size in bytes (rareq-sz, wareq-sz);
    r_await, w_await, await: average time from issue to completion, s (await counts
    discards too, as sysstat >= 12 does); aqu_sz: time_in_queue / interval;
    util: busy time / interval, % (above 100 % can happen on devices that serve IOs in
    parallel, and iostat does not clip it either). Plus the interval's raw deltas.
    """
    d = DiskCounters(*(_delta(a, b) for a, b in zip(prev, cur, strict=False)))
    ios = d.r_ios + d.w_ios + d.d_ios
    r_bytes, w_bytes = d.r_sectors * SECTOR, d.w_sectors * SECTOR
    return {
        "r_ios": d.r_ios,
        "w_ios": d.w_ios,
        "d_ios": d.d_ios,
        "r_bytes": r_bytes,
        "w_bytes": w_bytes,
        "r_ms": d.r_ms,
        "w_ms": d.w_ms,
        "d_ms": d.d_ms,
        "busy_ms": d.busy_ms,
        "queue_ms": d.queue_ms,
        "r_s": _round(d.r_ios / seconds),
        "w_s": _round(d.w_ios / seconds),
        "rB_s": _round(r_bytes / seconds),
        "wB_s": _round(w_bytes / seconds),
        "r_size": _round(r_bytes / d.r_ios) if d.r_ios else 0.0,
        "w_size": _round(w_bytes / d.w_ios) if d.w_ios else 0.0,
        "r_await": _round(d.r_ms / d.r_ios / 1000) if d.r_ios else 0.0,
        "w_await": _round(d.w_ms / d.w_ios / 1000) if d.w_ios else 0.0,
        "await": _round((d.r_ms + d.w_ms + d.d_ms) / ios / 1000) if ios else 0.0,
        "aqu_sz": _round(d.queue_ms / 1000 / seconds),
        "util": _round(d.busy_ms / 1000 / seconds * 100),
    }


def watched(name: str, counters: DiskCounters, partition: bool, keep: frozenset[str] = frozenset()) -> bool:
    """Whether a device of /proc/diskstats is sampled (see the module's docstring)."""
    if name in keep:
        return True
    if partition or name.startswith(NEVER):
        return False
    if name.startswith(IDLE_UNLESS_USED):
        return counters.used
    return True


def parse_cpu(text: str) -> dict[str, int]:
    """The aggregate `cpu` line of /proc/stat: ticks per mode."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:]]
            return dict(zip(CPU_MODES, values, strict=False))
    raise ValueError("/proc/stat has no 'cpu' line")


def parse_procs_running(text: str) -> int:
    """`procs_running` of /proc/stat: tasks running or runnable now, the reader included."""
    for line in text.splitlines():
        if line.startswith("procs_running "):
            return int(line.split()[1])
    raise ValueError("/proc/stat has no 'procs_running' line")


def cpu_interval(prev: dict[str, int], cur: dict[str, int], seconds: float) -> dict[str, float]:
    """Cores busy in each mode: 1.5 user means one and a half cores' worth of user time."""
    return {mode: _round(max(0, cur.get(mode, 0) - prev.get(mode, 0)) / HZ / seconds) for mode in CPU_MODES}


def parse_meminfo(text: str, keys: tuple[str, ...] = MEMINFO_KEYS) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in keys:
            out[name] = int(rest.split()[0]) * 1024
    return out


def parse_net_dev(text: str) -> dict[str, tuple[int, int]]:
    """Interface → (received bytes, transmitted bytes)."""
    out = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if len(fields) >= 9:
            out[name.strip()] = (int(fields[0]), int(fields[8]))
    return out


def net_interval(prev: tuple[int, int], cur: tuple[int, int], seconds: float) -> dict[str, float]:
    rx, tx = max(0, cur[0] - prev[0]), max(0, cur[1] - prev[1])
    return {"rx": rx, "tx": tx, "rx_bw": _round(rx / seconds), "tx_bw": _round(tx / seconds)}


def _read(path: str) -> str:
    with open(path, "rb") as handle:
        return handle.read().decode()


# --- what is under the target -----------------------------------------------------------------


def _mount_of(path: str, mountinfo: str) -> dict[str, str]:
    """The mount that holds `path` (the longest mount point above it; the last of stacked ones)."""
    best: dict[str, str] = {}
    for mount in shared_mountinfo.parse(mountinfo):
        point = mount["target"]
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best.get("mountpoint", "")):
            best = {"mountpoint": point, "devno": mount["devno"], "fstype": mount["fstype"], "source": mount["source"]}
    return best


def _block_stack(devno: str, sys_root: str) -> list[str]:
    """'7:0' → ['loop0']; a partition → [it, its disk]; dm/md → [it, the devices under it, ...]."""
    node = Path(sys_root, "dev/block", devno)
    if not node.exists():
        return []
    out: list[str] = []
    pending = [node.resolve()]
    while pending:
        dev = pending.pop(0)
        if dev.name in out:
            continue
        out.append(dev.name)
        if (dev / "partition").exists():
            pending.append(dev.parent)
        if (dev / "slaves").is_dir():
            pending.extend(sorted(p.resolve() for p in (dev / "slaves").iterdir()))
    return out


def target_storage(target: str | None, sys_root: str = "/sys", mountinfo: str = "/proc/self/mountinfo") -> dict:
    """The mount under `target` and its block devices ([] for tmpfs, NFS, FUSE: no device of this host)."""
    if not target:
        return {}
    path = os.path.realpath(target)
    mount = _mount_of(path, _read(mountinfo))
    devices = _block_stack(mount.get("devno", ""), sys_root) if mount else []
    source = mount.get("source", "")
    if not devices and source.startswith("/dev/"):
        # btrfs and a few others report an anonymous device number: go by the mount's source.
        try:
            st = os.stat(source)
            if stat.S_ISBLK(st.st_mode):
                devices = _block_stack(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}", sys_root)
        except OSError:
            pass
    return {"path": target, **mount, "devices": devices}


# --- the sampler --------------------------------------------------------------------------------


class _Snapshot(NamedTuple):
    wall: float
    mono: float
    disks: dict[str, DiskCounters]
    cpu: dict[str, int]
    mem: dict[str, int]
    net: dict[str, tuple[int, int]]
    tool_s: float
    tool_rss: int
    running: int


class Sampler(threading.Thread):
    """Samples the host every `interval` seconds from `after` seconds on until stop(); see the module."""

    def __init__(
        self,
        path: Path,
        tool_pid: int,
        after: float = 0.0,
        interval: float = 1.0,
        target: str | None = None,
        nvml: Any = NVML_MODULE,
        proc_root: str = "/proc",
        sys_root: str = "/sys",
    ):
        super().__init__(name="telemetry", daemon=True)
        self.path = Path(path)
        self.after = max(0.0, after)
        self.interval = interval
        self.target = target
        self.nvml = nvml  # pynvml, a module like it, its name, or None (no GPUs)
        self.proc, self.sys = proc_root, sys_root
        self.tree = ToolTree(tool_pid, proc_root)  # made now: the tool is not reaped yet
        self.tool_pid = tool_pid
        self.errors: list[str] = []
        self.summary: dict[str, Any] = {}
        self._stop_event = threading.Event()
        self._partition: dict[str, bool] = {}
        self._keep: frozenset[str] = frozenset()
        self._fd = -1
        self._first: _Snapshot | None = None  # the window's first snapshot, and its last sampled one
        self._last: _Snapshot | None = None
        self._samples = 0

    # -- public
    def stop(self, timeout: float = 10.0) -> dict[str, Any]:
        """End the window now (the tool ended); return the end record."""
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout)
        return self.summary

    # -- the thread
    def run(self) -> None:
        cpu0 = time.thread_time()
        gpu: GpuProbe | None = None
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            storage = self._storage()
            self._keep = frozenset(storage.get("devices", ()))
            nvml, handles, gpu_info = open_nvml(self.nvml)
            if nvml is not None:
                # Started before the window so that its first figures are in by the first sample.
                gpu = GpuProbe(nvml, handles, self.interval)
                gpu.start()
            if self._stop_event.wait(self.after):
                self.errors.append(f"the tool ended before the window opened ({self.after:g} s after its start)")
                return
            self._sample_every_interval(self._open_window(storage, gpu_info), gpu)
        except Exception as exc:  # noqa: BLE001 - telemetry must never take the run down with it
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self._end(cpu0, gpu)

    def _storage(self) -> dict[str, Any]:
        """What is under the target (target_storage); no devices, and the error said, where that cannot be told."""
        try:
            return target_storage(self.target, self.sys, f"{self.proc}/self/mountinfo")
        except (OSError, ValueError) as exc:
            self.errors.append(f"cannot tell what is under {self.target}: {exc}")
            return {"path": self.target, "devices": []}

    def _open_window(self, storage: dict[str, Any], gpu_info: dict[str, Any]) -> _Snapshot:
        """The window's first snapshot, written as the start record."""
        self._first = self._last = first = self._snapshot()
        self._write(
            {
                "type": "start",
                "schema": SCHEMA,
                "t": first.wall,
                "interval": self.interval,
                "after": self.after,
                "tool_pid": self.tool_pid,
                "target": storage,
                "hz": HZ,
                "cpus": os.cpu_count(),
                "boot_id": _read(f"{self.proc}/sys/kernel/random/boot_id").strip(),
                "mem": first.mem,
                "gpu": gpu_info,
            }
        )
        return first

    def _sample_every_interval(self, first: _Snapshot, gpu: GpuProbe | None) -> None:
        """A sample each interval after `first` until stop(), then the last, partial interval unless empty."""
        prev, deadline = first, first.mono + self.interval
        while True:
            stopped = self._stop_event.wait(max(0.0, deadline - time.monotonic()))
            cur = self._snapshot()
            if not stopped or cur.mono - prev.mono >= 0.01:
                self._write(self._sample(prev, cur, gpu))
                self._samples += 1
                prev = self._last = cur
            if stopped:
                break
            deadline += self.interval
            if deadline < time.monotonic():  # fell behind (a stalled host): skip, don't burst
                deadline = time.monotonic() + self.interval

    def _end(self, cpu0: float, gpu: GpuProbe | None) -> None:
        """Close the GPU probe and write the end record: samples, window, the sampler's own CPU, errors."""
        if gpu is not None:
            gpu.close()
            self.errors += gpu.errors
        own = time.thread_time() - cpu0 + (gpu.cpu_s if gpu else 0.0)
        window = (self._last.mono - self._first.mono) if self._first and self._last else 0.0
        self.summary = {
            "type": "end",
            "t": time.time(),
            "samples": self._samples,
            "window_s": _round(window),
            "sampler_cpu_s": _round(own),
            "sampler_cpu_pct": _round(own / window * 100) if window else None,
            "errors": self.errors,
        }
        if self._fd >= 0:
            self._write(self.summary)
            os.close(self._fd)

    def _write(self, record: dict[str, Any]) -> None:
        os.write(self._fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())

    def _is_partition(self, name: str) -> bool:
        if name not in self._partition:
            self._partition[name] = os.path.exists(f"{self.sys}/class/block/{name}/partition")
        return self._partition[name]

    def _snapshot(self) -> _Snapshot:
        proc_stat = _read(f"{self.proc}/stat")
        return _Snapshot(
            wall=time.time(),
            mono=time.monotonic(),
            disks=parse_diskstats(_read(f"{self.proc}/diskstats")),
            cpu=parse_cpu(proc_stat),
            mem=parse_meminfo(_read(f"{self.proc}/meminfo")),
            net=parse_net_dev(_read(f"{self.proc}/net/dev")),
            tool_s=self.tree.cpu_seconds(),
            tool_rss=self.tree.rss_bytes,
            running=max(0, parse_procs_running(proc_stat) - 1),  # less this thread, running as it reads
        )

    def _sample(self, prev: _Snapshot, cur: _Snapshot, gpu: GpuProbe | None) -> dict[str, Any]:
        seconds = cur.mono - prev.mono
        disks = {
            name: disk_interval(prev.disks[name], counters, seconds)
            for name, counters in cur.disks.items()
            if name in prev.disks and watched(name, counters, self._is_partition(name), self._keep)
        }
        net = {
            name: net_interval(prev.net[name], counters, seconds)
            for name, counters in cur.net.items()
            if name in prev.net and any(counters)
        }
        tool_s = max(0.0, cur.tool_s - prev.tool_s)
        record: dict[str, Any] = {
            "type": "sample",
            "t": cur.wall,
            "dt": _round(seconds),
            "disk": disks,
            "cpu": cpu_interval(prev.cpu, cur.cpu, seconds),
            "tool": {
                "cpu_s": _round(tool_s),
                "cores": _round(tool_s / seconds),
                "processes": self.tree.processes,
                "rss": cur.tool_rss,
            },
            "run_queue": cur.running,
            "mem": cur.mem,
            "net": net,
        }
        if gpu is not None:
            record["gpu"] = gpu.snapshot()
        return record
