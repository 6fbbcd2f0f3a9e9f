"""telemetry.jsonl on one host (iolab.host.telemetry) → summaries over the run, time series, caching check.

    merge(host_dir, tool_measurements)  → (measurements, metadata): what bench adds to a host's samples
    parse(host_dir)                     → Parsed: the summaries alone
    load_series(host_dir)               → {"dev_read_bw{device=loop0}": [(epoch s, B/s), ...], ...}
    potential_caching(telemetry, tool_read_bytes) → the flag, with its evidence

Summaries are over the telemetry window (from the end of the ramp to the tool's
end; for a tool that names its own measured window, as a loader leaves its start-up and
first step out, over the sampler's intervals whose middle falls inside that window) and
are exact: sums of the per-interval deltas divided by the window, not
averages of per-second rates. Per device (`params.device`), for devices that did
IO in the window and for the devices under the target (whose silence is evidence):

    dev_read_bw, dev_write_bw      B/s        dev_read_iops, dev_write_iops   IOPS
    dev_read_io_size, dev_write_io_size  B    dev_queue_len (iostat aqu-sz)  count
    dev_await, dev_read_await, dev_write_await  s                 dev_util    %

and `cpu_cores` (`params.scope` "host" with `params.mode` user/system/iowait/...,
or "tool": the tool's process tree), `foreign_cpu` (cores: the host's busy cores, every
mode but idle, iowait and steal, less the tool's, over the window; `foreign_cpu_peak`
its busiest interval), `run_queue` (count, tasks running or waiting for a CPU, mean;
`run_queue_peak` the most), `mem_available_min` (B, MemAvailable at its lowest;
`mem_taken_peak` how far below its value at the window's start),
`tool_rss_peak` (B, the tool tree's summed RSS at its highest), `page_cache_growth` (B,
`Cached` at the end less at the start), `net_rx_bw` / `net_tx_bw` (`params.interface`), and per GPU
(`params.gpu`) `gpu_util` (%, mean), `gpu_mem_used` (B, peak), `gpu_pcie_rx_bw` /
`gpu_pcie_tx_bw` (B/s, mean) when NVML reported them. The GPUs' SM clock, temperature
and power are in the time series only (`load_series`). Why a host has no GPU figures
is in the metadata (`telemetry.gpu.absent`).

Simulated hosts share one kernel: there the host CPU, run queue and memory are the whole
machine's, and foreign_cpu counts the other hosts' tools (iolab.measures.limits takes them out; the
metadata's `telemetry.boot_id` tells hosts on one kernel).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from iolab.parsers import LOWER, Measurement, Metric, Parsed, ParseError

FILE = "telemetry.jsonl"
IDLE_MODES = ("idle", "iowait", "steal")  # a CPU in these is not busy: waiting, or taken by the hypervisor
# Its summaries (besides the shared cpu_cores, gpu_util and gpu_mem_used) and its series (`load_series`, and the
# OSD series iolab.store.ceph reads beside it); `timeline` orders the HTML page's telemetry charts.
METRICS = (
    Metric("dev_read_bw", "B/s", "a device's bytes read per second", timeline=10),
    Metric("dev_write_bw", "B/s", "a device's bytes written per second", timeline=20),
    Metric("dev_util", "%", "a device busy", LOWER, timeline=30),
    Metric("dev_*_iops", "IOPS", "a device's requests per second"),
    Metric("dev_queue_len", "count", "a device's requests in flight", LOWER),
    Metric("dev_*_io_size", "B", "a device's mean request size"),
    Metric("dev_*await", "s", "a device's mean request time", LOWER),
    Metric("page_cache_growth", "B", "page cache grown over the run", LOWER),
    Metric("mem_cached", "B", "page cache", timeline=50),
    Metric("mem_dirty", "B", "dirty pages", timeline=60),
    Metric("mem_free", "B", "free memory"),
    Metric("mem_available", "B", "memory available without swapping (MemAvailable)", timeline=65),
    Metric("mem_available_min", "B", "memory available at its lowest"),
    Metric("mem_taken_peak", "B", "memory available at the start less at its lowest", LOWER),
    Metric("tool_rss", "B", "the tool's processes' resident memory, summed", LOWER),
    Metric("tool_rss_peak", "B", "the tool's processes' resident memory at its highest", LOWER),
    Metric("foreign_cpu", "cores", "CPU busy outside the tool's processes", LOWER, timeline=45),
    Metric("foreign_cpu_peak", "cores", "CPU busy outside the tool's processes, busiest interval", LOWER),
    Metric("run_queue", "count", "tasks running or waiting for a CPU", LOWER, timeline=47),
    Metric("run_queue_peak", "count", "tasks running or waiting for a CPU, at most", LOWER),
    Metric("net_rx_bw", "B/s", "an interface's bytes received per second", timeline=70),
    Metric("net_tx_bw", "B/s", "an interface's bytes sent per second", timeline=80),
    Metric("osd_read_bw", "B/s", "a Ceph OSD's bytes read per second", timeline=90),
    Metric("osd_write_bw", "B/s", "a Ceph OSD's bytes written per second", timeline=100),
    Metric("osd_iops", "IOPS", "a Ceph OSD's operations per second", timeline=110),
    Metric("osd_op_await", "s", "a Ceph OSD's mean operation time", LOWER, timeline=120),
    Metric("osd_cache_*_bw", "B/s", "a Ceph OSD's cache hits or misses, bytes per second"),
    Metric("gpu_pcie_rx_bw", "B/s", "a GPU's PCIe bytes received per second", timeline=150),
    Metric("gpu_pcie_tx_bw", "B/s", "a GPU's PCIe bytes sent per second"),
    Metric("gpu_sm_clock", "Hz", "a GPU's SM clock", timeline=160),
    Metric("gpu_temp", "°C", "a GPU's temperature", LOWER, timeline=170),
    Metric("gpu_power", "W", "a GPU's power draw", LOWER, timeline=180),
)
# Potential caching: "almost no reads" on the devices is less than this share of what the tool read,
DEVICE_READ_SHARE = 0.10
# and a run that read less than this is not judged (a write test reads nothing).
MIN_TOOL_READ = 1 << 20


@dataclasses.dataclass(frozen=True)
class Telemetry:
    """One host's telemetry.jsonl, read once."""

    path: Path
    start: dict[str, Any]
    samples: list[dict[str, Any]]
    end: dict[str, Any]

    @property
    def window_s(self) -> float:
        return sum(s["dt"] for s in self.samples)

    @property
    def target(self) -> dict[str, Any]:
        return self.start.get("target") or {}

    @property
    def page_cache_growth(self) -> int | None:
        before = self.start.get("mem", {}).get("Cached")
        after = self.samples[-1]["mem"].get("Cached") if self.samples else None
        return None if before is None or after is None else after - before

    def over(self, start: float, end: float) -> Telemetry:
        """The intervals whose middle falls in [start, end] (epoch s), the window's start state being the last
        interval's before them; itself when no interval does (a window shorter than half an interval)."""
        kept = [s for s in self.samples if start <= s["t"] - s["dt"] / 2 <= end]
        if not kept:
            return self
        before = [s for s in self.samples if s["t"] <= kept[0]["t"] - kept[0]["dt"]]
        mem = before[-1].get("mem", self.start.get("mem", {})) if before else self.start.get("mem", {})
        opened = {**self.start, "t": kept[0]["t"] - kept[0]["dt"], "mem": mem, "window": [start, end]}
        return dataclasses.replace(self, start=opened, samples=kept)

    def device_totals(self) -> dict[str, dict[str, float]]:
        """Per device, the sums over the window of every raw delta (r_ios, r_bytes, r_ms, busy_ms, ...)."""
        totals: dict[str, dict[str, float]] = {}
        for sample in self.samples:
            for name, dev in sample["disk"].items():
                into = totals.setdefault(name, {})
                for key in _DISK_DELTAS:
                    into[key] = into.get(key, 0) + dev.get(key, 0)
        for name in self.target.get("devices", []):
            totals.setdefault(name, dict.fromkeys(_DISK_DELTAS, 0))
        return totals


_DISK_DELTAS = ("r_ios", "w_ios", "d_ios", "r_bytes", "w_bytes", "r_ms", "w_ms", "d_ms", "busy_ms", "queue_ms")


def load(host_dir: Path) -> Telemetry | None:
    """The host's telemetry, or None when the run kept none (no file, or the window never opened)."""
    path = Path(host_dir) / FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ParseError(f"{path}: cannot read: {exc.strerror}") from None
    start: dict[str, Any] = {}
    end: dict[str, Any] = {}
    samples = []
    for number, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            kind = record["type"]
        except (ValueError, KeyError, TypeError):
            if not raw.endswith(b"\n") and number == raw.count(b"\n") + 1:
                break  # the last line, torn: the host went away mid-write
            raise ParseError(f'{path}: line {number} is not a telemetry record (JSON with a "type")') from None
        if kind == "start":
            start = record
        elif kind == "sample":
            if not isinstance(record.get("disk"), dict) or not isinstance(record.get("dt"), (int, float)):
                raise ParseError(f'{path}: line {number}: sample without "disk" or "dt"')
            samples.append(record)
        elif kind == "end":
            end = record
    if not start:
        return None
    return Telemetry(path=path, start=start, samples=samples, end=end)


def summarize(tel: Telemetry) -> list[Measurement]:
    window = tel.window_s
    if window <= 0:
        return []
    out: list[Measurement] = []
    under_target = set(tel.target.get("devices", []))
    for name, t in sorted(tel.device_totals().items()):
        if name in under_target or t["r_ios"] or t["w_ios"] or t["d_ios"]:
            out += _device(name, t, window)
    out += _cpu(tel, window)
    out += _load(tel, window)
    growth = tel.page_cache_growth
    if growth is not None:
        out.append(Measurement("page_cache_growth", float(growth), "B"))
    out += _net(tel, window)
    out += _gpus(tel)
    return out


def _device(name: str, t: dict[str, float], window: float) -> list[Measurement]:
    p = {"device": name}
    ios = t["r_ios"] + t["w_ios"] + t["d_ios"]
    out = [
        Measurement("dev_read_bw", t["r_bytes"] / window, "B/s", p),
        Measurement("dev_write_bw", t["w_bytes"] / window, "B/s", p),
        Measurement("dev_read_iops", t["r_ios"] / window, "IOPS", p),
        Measurement("dev_write_iops", t["w_ios"] / window, "IOPS", p),
        Measurement("dev_queue_len", t["queue_ms"] / 1000 / window, "count", p),
        Measurement("dev_util", t["busy_ms"] / 1000 / window * 100, "%", p),
    ]
    if t["r_ios"]:
        out.append(Measurement("dev_read_io_size", t["r_bytes"] / t["r_ios"], "B", p))
        out.append(Measurement("dev_read_await", t["r_ms"] / 1000 / t["r_ios"], "s", p))
    if t["w_ios"]:
        out.append(Measurement("dev_write_io_size", t["w_bytes"] / t["w_ios"], "B", p))
        out.append(Measurement("dev_write_await", t["w_ms"] / 1000 / t["w_ios"], "s", p))
    if ios:
        out.append(Measurement("dev_await", (t["r_ms"] + t["w_ms"] + t["d_ms"]) / 1000 / ios, "s", p))
    return out


def foreign_cores(sample: dict[str, Any]) -> float:
    """Cores one interval kept busy outside the tool's tree: busy modes (all but IDLE_MODES) less the tool's."""
    busy = sum(cores for mode, cores in sample.get("cpu", {}).items() if mode not in IDLE_MODES)
    return max(0.0, busy - sample.get("tool", {}).get("cores", 0.0))


def _cpu(tel: Telemetry, window: float) -> list[Measurement]:
    modes: dict[str, float] = {}
    tool = 0.0
    for s in tel.samples:
        for mode, cores in s.get("cpu", {}).items():
            modes[mode] = modes.get(mode, 0.0) + cores * s["dt"]
        tool += s.get("tool", {}).get("cpu_s", 0.0)
    out = [
        Measurement("cpu_cores", seconds / window, "cores", {"scope": "host", "mode": mode})
        for mode, seconds in modes.items()
    ]
    out.append(Measurement("cpu_cores", tool / window, "cores", {"scope": "tool"}))
    if modes:
        busy = sum(seconds for mode, seconds in modes.items() if mode not in IDLE_MODES)
        out.append(Measurement("foreign_cpu", max(0.0, busy - tool) / window, "cores"))
        out.append(Measurement("foreign_cpu_peak", max(foreign_cores(s) for s in tel.samples), "cores"))
    return out


def _load(tel: Telemetry, window: float) -> list[Measurement]:
    """The run queue (mean over the window, weighted by each interval's length, and peak), MemAvailable at its
    lowest and how far it fell from the window's start, and the tool tree's RSS at its highest: of the samples
    that carry them (older files do not)."""
    queue = [(s["run_queue"], s["dt"]) for s in tel.samples if "run_queue" in s]
    available = [s["mem"]["MemAvailable"] for s in tel.samples if "MemAvailable" in s.get("mem", {})]
    rss = [s["tool"]["rss"] for s in tel.samples if "rss" in s.get("tool", {})]
    out = []
    if queue:
        out.append(Measurement("run_queue", sum(n * dt for n, dt in queue) / window, "count"))
        out.append(Measurement("run_queue_peak", float(max(n for n, _ in queue)), "count"))
    if available:
        out.append(Measurement("mem_available_min", float(min(available)), "B"))
        if "MemAvailable" in tel.start.get("mem", {}):
            taken = tel.start["mem"]["MemAvailable"] - min(available)
            out.append(Measurement("mem_taken_peak", float(max(0, taken)), "B"))
    if rss:
        out.append(Measurement("tool_rss_peak", float(max(rss)), "B"))
    return out


def _net(tel: Telemetry, window: float) -> list[Measurement]:
    totals: dict[str, list[float]] = {}
    for s in tel.samples:
        for name, nic in s.get("net", {}).items():
            into = totals.setdefault(name, [0, 0])
            into[0] += nic["rx"]
            into[1] += nic["tx"]
    out = []
    for name, (rx, tx) in sorted(totals.items()):
        if rx or tx:
            out.append(Measurement("net_rx_bw", rx / window, "B/s", {"interface": name}))
            out.append(Measurement("net_tx_bw", tx / window, "B/s", {"interface": name}))
    return out


def _gpus(tel: Telemetry) -> list[Measurement]:
    per_gpu: dict[int, dict[str, list[float]]] = {}
    for s in tel.samples:
        for gpu in s.get("gpu", []):
            into = per_gpu.setdefault(gpu["index"], {})
            for key in ("util", "mem_used", "pcie_rx_bw", "pcie_tx_bw"):
                if gpu.get(key) is not None:
                    into.setdefault(key, []).append(float(gpu[key]))
    out = []
    for index, values in sorted(per_gpu.items()):
        p = {"gpu": str(index)}
        if values.get("util"):
            out.append(Measurement("gpu_util", sum(values["util"]) / len(values["util"]), "%", p))
        if values.get("mem_used"):
            out.append(Measurement("gpu_mem_used", max(values["mem_used"]), "B", p))
        for key in ("pcie_rx_bw", "pcie_tx_bw"):
            if values.get(key):
                out.append(Measurement(f"gpu_{key}", sum(values[key]) / len(values[key]), "B/s", p))
    return out


def _info(tel: Telemetry) -> dict[str, Any]:
    """What the samples' metadata says about the telemetry itself."""
    return {
        "window_s": tel.window_s,
        "interval_s": tel.start.get("interval"),
        "samples": len(tel.samples),
        "started_at": tel.start.get("t"),
        # the tool's measured window (epoch s) the summaries were cut to, when it named one and it held an interval
        "tool_window": tel.start.get("window"),
        "target": tel.target,
        "sampler_cpu_pct": tel.end.get("sampler_cpu_pct"),
        "errors": tel.end.get("errors", []),
        "gpu": tel.start.get("gpu"),
        "cpus": tel.start.get("cpus"),
        "mem_total": tel.start.get("mem", {}).get("MemTotal"),
        "boot_id": tel.start.get("boot_id"),
    }


def parse(host_dir: Path) -> Parsed:
    """The summaries of `host_dir/telemetry.jsonl` (none when the run kept no telemetry)."""
    tel = load(host_dir)
    if tel is None:
        return Parsed(measurements=[], metadata={})
    return Parsed(measurements=summarize(tel), metadata={"telemetry": _info(tel)})


# --- potential caching --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CachingCheck:
    flagged: bool
    reasons: list[str]  # one sentence per check: what was found, and whether it fired
    evidence: dict[str, Any]  # the figures behind them


def _mib(value: float) -> str:
    return f"{value / (1 << 20):.1f} MiB"


def potential_caching(tel: Telemetry, tool_read_bytes: float) -> CachingCheck:
    """Whether the tool's reads may have come from the page cache rather than the storage.

    Two checks, either one flags the run: the page cache grew by at least what the
    tool read (what it read is now cached: a repeat, or a re-read within the run,
    measures memory); or the tool read while the block devices under the target
    read almost nothing (< DEVICE_READ_SHARE of it). The second does not apply to
    a target without a block device of this host (tmpfs, NFS, FUSE).
    """
    growth = tel.page_cache_growth
    totals = tel.device_totals()
    devices = tel.target.get("devices", [])
    device_read = max((totals[d]["r_bytes"] for d in devices), default=0.0)
    evidence = {
        "tool_read_bytes": tool_read_bytes,
        "page_cache_growth_bytes": growth,
        "target_devices": devices,
        "device_read_bytes": device_read if devices else None,
        "window_s": tel.window_s,
    }
    if tool_read_bytes < MIN_TOOL_READ:
        return CachingCheck(
            False,
            [f"not judged: the tool read {_mib(tool_read_bytes)} in the window (less than {_mib(MIN_TOOL_READ)})"],
            evidence,
        )
    reasons = []
    fired = False
    if growth is None:
        reasons.append("page cache growth: unknown (no Cached figure)")
    elif growth >= tool_read_bytes:
        fired = True
        reasons.append(
            f"page cache grew by {_mib(growth)} during the run, at least the {_mib(tool_read_bytes)} the tool read"
        )
    else:
        change = f"grew by {_mib(growth)}" if growth >= 0 else f"shrank by {_mib(-growth)}"
        reasons.append(f"page cache {change}, less than the {_mib(tool_read_bytes)} the tool read (not a sign)")
    if not devices:
        fstype = tel.target.get("fstype") or "unknown"
        what = "no target was given" if not tel.target else f"the target's mount ({fstype}) has no block device"
        reasons.append(f"device reads: not applicable, {what}")
    elif device_read < DEVICE_READ_SHARE * tool_read_bytes:
        fired = True
        reasons.append(
            f"the tool read {_mib(tool_read_bytes)} while {', '.join(devices)} under the target read "
            f"{_mib(device_read)} (less than {DEVICE_READ_SHARE:.0%})"
        )
    else:
        reasons.append(
            f"{', '.join(devices)} under the target read {_mib(device_read)} of the "
            f"{_mib(tool_read_bytes)} the tool read (not a sign)"
        )
    return CachingCheck(fired, reasons, evidence)


def tool_read_bytes(measurements: list[Measurement], seconds: float) -> float:
    """Bytes the tool read in a window of `seconds`, from its read_bw (B/s) figures."""
    return sum(m.value for m in measurements if m.metric == "read_bw" and m.unit == "B/s") * seconds


def merge(
    host_dir: Path, tool_measurements: list[Measurement], window: tuple[float, float] | None = None
) -> tuple[list[Measurement], dict[str, Any]]:
    """The telemetry measurements of a host, and the metadata every sample of that host gets; over the tool's
    measured `window` (epoch s, Parsed.window) when it names one, so that the host's CPU, queue and devices are
    judged over the seconds its figures cover.

    ([], {}) without telemetry; a telemetry file that cannot be read costs the run
    nothing but its telemetry, and says why in `telemetry_error`.
    """
    try:
        tel = load(host_dir)
    except ParseError as exc:
        return [], {"telemetry_error": str(exc)}
    if tel is None:
        return [], {}
    if window is not None:
        tel = tel.over(*window)
    check = potential_caching(tel, tool_read_bytes(tool_measurements, tel.window_s))
    metadata = {
        "telemetry": _info(tel),
        "flags": ["potential_caching"] if check.flagged else [],
        "flag_reasons": check.reasons,
        "caching_evidence": check.evidence,
    }
    return summarize(tel), metadata


# --- time series for plots ----------------------------------------------------------------------


def load_series(run_host_dir: Path) -> dict[str, list[tuple[float, float]]]:
    """Per-second series of one host's run, {name: [(epoch seconds at the interval's end, value), ...]}.

    Names are the summary metrics with their qualifier, in the summaries' units:
    `dev_read_bw{device=loop0}` (B/s), `dev_write_bw{...}`, `dev_read_iops{...}`,
    `dev_write_iops{...}`, `dev_read_io_size{...}` (B), `dev_queue_len{...}`, `dev_await{...}` (s),
    `dev_util{...}` (%), `cpu_cores{mode=user}` ... and `cpu_cores{scope=tool}` (cores),
    `foreign_cpu` (cores), `run_queue` (count), `tool_rss` (B),
    `mem_cached`, `mem_dirty`, `mem_free`, `mem_available` (B), `net_rx_bw{interface=eth0}`, `net_tx_bw{...}` (B/s),
    `gpu_util{gpu=0}` (%), `gpu_mem_used{gpu=0}` (B), `gpu_pcie_rx_bw{gpu=0}`, `gpu_pcie_tx_bw{gpu=0}` (B/s),
    `gpu_sm_clock{gpu=0}` (Hz), `gpu_temp{gpu=0}` (°C), `gpu_power{gpu=0}` (W).
    A device that joins late (a loop device's first IO) starts late. Empty without telemetry.
    """
    tel = load(run_host_dir)
    series: dict[str, list[tuple[float, float]]] = {}
    if tel is None:
        return series

    def add(name: str, t: float, value: float | None) -> None:
        if value is not None:
            series.setdefault(name, []).append((t, float(value)))

    for s in tel.samples:
        t = s["t"]
        for name, dev in s["disk"].items():
            q = f"{{device={name}}}"
            for metric, key in (
                ("dev_read_bw", "rB_s"),
                ("dev_write_bw", "wB_s"),
                ("dev_read_iops", "r_s"),
                ("dev_write_iops", "w_s"),
                ("dev_queue_len", "aqu_sz"),
                ("dev_await", "await"),
                ("dev_util", "util"),
            ):
                add(metric + q, t, dev.get(key))
            if dev.get("r_ios"):
                add("dev_read_io_size" + q, t, dev.get("r_size"))
        for mode, cores in s.get("cpu", {}).items():
            add(f"cpu_cores{{mode={mode}}}", t, cores)
        add("cpu_cores{scope=tool}", t, s.get("tool", {}).get("cores"))
        if s.get("cpu"):
            add("foreign_cpu", t, foreign_cores(s))
        add("run_queue", t, s.get("run_queue"))
        add("tool_rss", t, s.get("tool", {}).get("rss"))
        for key, name in (
            ("Cached", "mem_cached"),
            ("Dirty", "mem_dirty"),
            ("MemFree", "mem_free"),
            ("MemAvailable", "mem_available"),
        ):
            add(name, t, s.get("mem", {}).get(key))
        for name, nic in s.get("net", {}).items():
            add(f"net_rx_bw{{interface={name}}}", t, nic.get("rx_bw"))
            add(f"net_tx_bw{{interface={name}}}", t, nic.get("tx_bw"))
        for gpu in s.get("gpu", []):
            q = f"{{gpu={gpu['index']}}}"
            for key in ("util", "mem_used", "pcie_rx_bw", "pcie_tx_bw", "sm_clock", "temp", "power"):
                add(f"gpu_{key}{q}", t, gpu.get(key))
    return series
