"""What limited a probe, and whether foreign load disturbed it (controller side: samples in, verdicts out).

A probe of an accelerator search is a loader run with host telemetry (iolab.host.telemetry,
summed up over the run's window by iolab.parsers.telemetry). From one probe's samples:

    ev = evidence(samples, hosts, baseline=store.samples())   # the figures, each in its unit
    limited_by(ev)     → Limit("client" | "storage" | "undetermined", reason naming the figures)
    disturbed(ev)      → why CPU used outside the emulator disturbed the probe, or None
    capacity(ev, n)    → the most ranks per host this host can emulate, from the probe at n per host
    gpu_verdict(samples, ceiling)  → a real-GPU run's limit: "gpu", "client" (decode), "storage" or "undetermined"

The client side is the host's CPU (busy cores: every mode but idle, iowait and steal), its run
queue, its memory (MemAvailable at its lowest) and the emulator's own processes (the tool's tree:
CPU and summed RSS). The storage side is the busiest block device under the data set (util, read
await) and the probe's read rate against the backend's own fio read baseline from the same
campaign. Simulated hosts share one kernel (the telemetry's boot_id says so): their host CPU, run
queue and memory are the whole machine's, so the hosts on one kernel are judged together, with
every one of their tools as the emulator's CPU.

The thresholds, and why:

- CPU_SATURATED (0.90 of the host's cores busy): the rest is the sampler, hostrun, sshd and the
  kernel's own threads; a host this busy has no core left for the emulator to grow into, and a
  rank waits for a CPU rather than for its data. A run queue above the cores says the same from
  the other side (tasks waiting for a CPU), even when short sleeps keep the busy share lower.
- MEM_SHORT (MemAvailable under 0.10 of MemTotal): below it the kernel reclaims the page cache
  (the data set's pages among them) and kswapd competes for the CPU; what was measured is the
  host's memory.
- DEVICE_BUSY (util ≥ 90 %): a device with IO in flight nine tenths of the time has no idle time
  left to serve more (for devices that serve requests in parallel, NVMe, util understates, so
  the next two rules stand beside it).
- AWAIT_HIGH (mean read await ≥ 20 ms): slower than any device's service time but a saturated
  or throttled one's (NVMe ≈ 0.1 ms, SATA SSD ≈ 1 ms, a busy disk ≈ 10 ms).
- BASELINE_SHARE (the probe's read rate ≥ 0.90 of the fastest fio read baseline of the backend):
  the storage gave the loader as much as it gave fio.
- GPU_BUSY (NVML's utilization ≥ 90 % over the measured window) and CEILING_SHARE (a real-data
  rate ≥ 0.90 of the synthetic ceiling at the same GPU count): a GPU busy nine tenths of the
  time, or a loader that keeps up with what the GPUs eat from memory, leaves the GPUs as the
  limit; then the client's CPU (the loader decodes) and the storage are judged as for a probe, and the
  client is also the limit where the decode would need, at the CPU per image it spent, at least
  CPU_SATURATED of the hosts' cores to feed the ceiling (seen on an H200 host of 16 cores: the
  PIL reader needed 20.7–22.6 cores to feed the ceiling and kept 61–66 % of it). AU_FED (AU ≥
  90 %, MLPerf Storage's mark for resnet50 and unet3d) under the ceiling's share: the data came on
  time and the step itself ran slower than the synthetic leg's (seen there: the packed reader at
  AU 99 %, 81–83 % of the ceiling, its batches copied from pageable memory with 15 workers on the
  16 cores), so the training step, not the loader nor the storage, is the limit.
- FOREIGN_MIN_CORES (0.25 core) and FOREIGN_SHARE (0.10 of the cores): CPU used outside the
  emulator disturbs a probe when it is at least a quarter of a core (a quiet host's own daemons
  and the sampler stay well under) and either a tenth of the host or taken from a saturated host.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from typing import Any

from iolab.measures.samples import AGGREGATE_HOST, Sample
from iolab.parsers.telemetry import IDLE_MODES
from iolab.units import human

CPU_SATURATED = 0.90
MEM_SHORT = 0.10
DEVICE_BUSY = 90.0  # %
AWAIT_HIGH = 0.020  # s
BASELINE_SHARE = 0.90
FOREIGN_MIN_CORES = 0.25
FOREIGN_SHARE = 0.10
READS = ("read", "randread")  # fio jobs that make a read baseline
GPU_BUSY = 90.0  # %
CEILING_SHARE = 0.90
AU_FED = 90.0  # %


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One probe's figures. The client side is that of the tightest kernel (the busiest share of its cores)."""

    hosts: tuple[str, ...]  # the probe's hosts on that kernel (several: simulated hosts, one machine)
    kernels: int  # how many kernels the probe's hosts ran on (1: one machine)
    cores: int  # CPUs of that kernel (0: no telemetry)
    busy_cores: float  # cores busy, every mode but idle, iowait and steal (cores, mean over the window)
    tool_cores: float  # the emulator's processes on that kernel, every host's tool (cores)
    foreign_cores: float  # busy less the emulator's (cores, mean over the window)
    foreign_peak: float  # the same in the busiest one-second interval (cores)
    run_queue: float  # tasks running or waiting for a CPU (mean)
    run_queue_peak: float  # (most)
    mem_available_min: float | None  # B, MemAvailable at its lowest
    mem_total: float | None  # B
    tool_rss: float | None  # B, the emulator's processes' summed RSS at its highest (every host's on the kernel)
    mem_taken: float | None  # B, MemAvailable at the window's start less at its lowest (the kernel's)
    device: str | None  # the busiest block device under the data set (None: tmpfs, NFS, no telemetry)
    device_util: float | None  # %
    device_read_await: float | None  # s
    read_bw: float  # B/s, the probe's reads over all its hosts
    baseline_bw: float | None  # B/s, the backend's fastest fio read baseline in the campaign
    baseline_workload: str | None  # the fio workload that made it


@dataclasses.dataclass(frozen=True)
class Limit:
    side: str  # "client", "storage" or "undetermined"
    reason: str  # the figures behind it, with units


def said(limit: Mapping[str, str]) -> str:
    """A stored Limit as a line says it: "limited by storage: …", "limited by this host's CPU: …", "limited by
    neither side: …". Each reason opens with what it names, so that it reads after "limited by"."""
    return f"limited by {limit['reason']}"


_FIGURES = ("foreign_cpu_peak", "run_queue", "run_queue_peak", "mem_available_min", "mem_taken_peak", "tool_rss_peak")


def _host_figures(samples: list[Sample]) -> dict[str, Any]:
    """One host's client-side figures from its samples (its telemetry's summaries and metadata)."""
    fig: dict[str, Any] = {"busy": 0.0, "tool": 0.0}
    for s in samples:
        scope = s.params.get("scope")
        if s.metric == "cpu_cores" and scope == "host":
            if s.params.get("mode") not in IDLE_MODES:
                fig["busy"] += s.value
        elif s.metric == "cpu_cores" and scope == "tool":
            fig["tool"] = s.value
        elif s.metric in _FIGURES:
            fig[s.metric] = s.value
        if "telemetry" in s.metadata:
            fig["telemetry"] = s.metadata["telemetry"]
    return fig


def _kernel(hosts: list[str], figures: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The client side of the hosts on one kernel: its CPU, queue and memory once, every host's tool summed."""
    one = [figures[h] for h in hosts]
    tel = one[0].get("telemetry", {})
    busy = statistics.fmean(f["busy"] for f in one)
    tool = sum(f["tool"] for f in one)
    # A host's own peak less the other hosts' tools (their means: the series are not in the samples).
    peaks = [f.get("foreign_cpu_peak", 0.0) - (tool - f["tool"]) for f in one]
    lows = [f["mem_available_min"] for f in one if "mem_available_min" in f]
    rss = [f["tool_rss_peak"] for f in one if "tool_rss_peak" in f]
    taken = [f["mem_taken_peak"] for f in one if "mem_taken_peak" in f]
    return {
        "hosts": tuple(hosts),
        "cores": int(tel.get("cpus") or 0),
        "busy_cores": busy,
        "tool_cores": tool,
        "foreign_cores": max(0.0, busy - tool),
        "foreign_peak": max([0.0, busy - tool, *peaks]),
        "run_queue": statistics.fmean(f.get("run_queue", 0.0) for f in one),
        "run_queue_peak": max(f.get("run_queue_peak", 0.0) for f in one),
        "mem_available_min": min(lows) if lows else None,
        "mem_total": tel.get("mem_total"),
        "tool_rss": sum(rss) if rss else None,
        "mem_taken": max(taken) if taken else None,
    }


def _device(samples: list[Sample], figures: dict[str, dict[str, Any]]) -> tuple[str | None, float | None, float | None]:
    """(name, util %, read await s) of the busiest device under the data set on any host."""
    best: tuple[str | None, float | None, float | None] = (None, None, None)
    for host, fig in figures.items():
        under = set(fig.get("telemetry", {}).get("target", {}).get("devices", []))
        mine = [s for s in samples if s.host == host and s.params.get("device") in under]
        for s in mine:
            if s.metric == "dev_util" and (best[1] is None or s.value > best[1]):
                name = s.params["device"]
                waits = [x.value for x in mine if x.metric == "dev_read_await" and x.params["device"] == name]
                wait = waits[0] if waits else None
                best = (name, s.value, wait)
    return best


def _read_bw(samples: list[Sample], hosts: list[str]) -> float:
    """The run's read rate over its hosts (B/s): host "*" when it was made, else the hosts' sum."""
    reads = [s for s in samples if s.metric == "read_bw" and not s.params.get("syscall")]
    everywhere = [s.value for s in reads if s.host == AGGREGATE_HOST]
    return everywhere[0] if everywhere else sum(s.value for s in reads if s.host in hosts)


def fio_baseline(stored: list[Sample], backend: str) -> tuple[float, str] | None:
    """(B/s, workload) of the backend's fastest fio read workload in the store: each of its runs' read rate over
    its hosts, averaged over the runs of the workload; None when the campaign has none."""
    runs: dict[str, list[Sample]] = {}
    for s in stored:
        runs.setdefault(s.run_id, []).append(s)
    by_workload: dict[str, list[float]] = {}
    for mine in runs.values():
        options = next((s.metadata.get("fio_options") for s in mine if "fio_options" in s.metadata), None)
        if mine[0].backend != backend or not isinstance(options, dict) or options.get("rw") not in READS:
            continue
        hosts = sorted({s.host for s in mine if s.host != AGGREGATE_HOST})
        by_workload.setdefault(mine[0].workload, []).append(_read_bw(mine, hosts))
    if not by_workload:
        return None
    workload, rates = max(by_workload.items(), key=lambda item: statistics.fmean(item[1]))
    return statistics.fmean(rates), workload


def evidence(samples: list[Sample], hosts: list[str], baseline: list[Sample] | None = None) -> Evidence:
    """The figures of one probe run (`samples`: all its samples, every host's); `baseline`: the campaign store's
    samples, where the backend's fio read baseline is looked for (none when not given)."""
    figures = {h: _host_figures([s for s in samples if s.host == h]) for h in hosts}
    kernels: dict[str, list[str]] = {}
    for host in hosts:
        boot = figures[host].get("telemetry", {}).get("boot_id") or f"host {host}"
        kernels.setdefault(boot, []).append(host)
    sides = [_kernel(group, figures) for group in kernels.values()]
    client = max(sides, key=lambda k: k["busy_cores"] / k["cores"] if k["cores"] else -1.0)
    device, util, wait = _device(samples, figures)
    backend = samples[0].backend if samples else ""
    fio = fio_baseline(baseline, backend) if baseline else None
    return Evidence(
        **client,
        kernels=len(kernels),
        device=device,
        device_util=util,
        device_read_await=wait,
        read_bw=_read_bw(samples, hosts),
        baseline_bw=fio[0] if fio else None,
        baseline_workload=fio[1] if fio else None,
    )


def _whose(ev: Evidence) -> str:
    """Whose client side the verdict names: this host, the machine of simulated hosts, or one of several hosts."""
    if len(ev.hosts) > 1:
        return f"this machine's (simulated hosts {', '.join(ev.hosts)} on one kernel)"
    return f"host {ev.hosts[0]}'s" if ev.kernels > 1 else "this host's"


def _cpu(ev: Evidence) -> str:
    return f"{ev.busy_cores:.2f} of {ev.cores} cores busy, run queue {ev.run_queue:.1f}"


def _client(ev: Evidence) -> str | None:
    """The client side's limit, named with its figures, or None when it had headroom."""
    if not ev.cores:
        return None
    if ev.busy_cores >= CPU_SATURATED * ev.cores or ev.run_queue > ev.cores:
        return f"{_whose(ev)} CPU: {_cpu(ev)} (the emulator {ev.tool_cores:.2f})"
    if ev.mem_available_min is not None and ev.mem_total and ev.mem_available_min < MEM_SHORT * ev.mem_total:
        return (
            f"{_whose(ev)} memory: {human(ev.mem_available_min, 'B')} of {human(ev.mem_total, 'B')} "
            "available at its lowest"
        )
    return None


def _storage(ev: Evidence) -> tuple[bool, bool, str]:
    """(saturated: the read rate at the fio baseline or a high read await; busy: the device's util at its limit;
    the storage side's figures)."""
    figures, saturated, busy = [], False, False
    if ev.device is not None and ev.device_util is not None:
        busy = ev.device_util >= DEVICE_BUSY
        figures.append(f"device {ev.device} {ev.device_util:.0f} % busy")
    if ev.device_read_await is not None:
        saturated |= ev.device_read_await >= AWAIT_HIGH
        figures.append(f"read await {ev.device_read_await * 1000:.3g} ms")
    if ev.baseline_bw:
        saturated |= ev.read_bw >= BASELINE_SHARE * ev.baseline_bw
        figures.append(
            f"{human(ev.read_bw, 'B/s')} of a {human(ev.baseline_bw, 'B/s')} fio baseline ({ev.baseline_workload})"
        )
    else:
        figures.append(f"{human(ev.read_bw, 'B/s')} read, no fio read baseline in the campaign")
    return saturated, busy, ", ".join(figures)


def limited_by(ev: Evidence) -> Limit:
    """What stopped the probe, with the figures behind it (thresholds: the module's).

    Storage when it gave what fio got from it or answered slowly: more client CPU would not have
    read faster, whatever the client's state. Else client when the host's CPU or memory was at
    its limit: what was measured is the host. Else storage when the device was busy (util alone
    is weak evidence on devices that serve requests in parallel, so it counts only on a client
    with headroom). Else undetermined.
    """
    if not ev.cores:
        return Limit("undetermined", "an unknown: no host telemetry in the probe's samples")
    client = _client(ev)
    saturated, busy, storage = _storage(ev)
    if saturated:
        also = f"; {client}" if client else f"; {_whose(ev)} CPU: {_cpu(ev)}"
        return Limit("storage", f"storage: {storage}{also}")
    if client:
        return Limit("client", f"{client}; storage: {storage}")
    if busy:
        return Limit("storage", f"storage: {storage}; {_whose(ev)} CPU: {_cpu(ev)}")
    return Limit("undetermined", f"neither side: {_whose(ev)} CPU: {_cpu(ev)}; storage: {storage}")


def disturbed(ev: Evidence) -> str | None:
    """Why CPU used outside the emulator disturbed this probe (the module's FOREIGN_* rule), or None."""
    if not ev.cores or ev.foreign_cores < FOREIGN_MIN_CORES:
        return None
    if ev.foreign_cores < FOREIGN_SHARE * ev.cores and ev.busy_cores < CPU_SATURATED * ev.cores:
        return None
    return (
        f"foreign load: {ev.foreign_cores:.2f} of {ev.cores} cores busy outside the emulator "
        f"(busiest second {ev.foreign_peak:.2f}; {_whose(ev)} CPU: {_cpu(ev)})"
    )


def capacity(ev: Evidence, accelerators: int) -> int:
    """The most ranks per host this host can emulate, from this probe's cost per rank at `accelerators` per host:
    CPU (the emulator's cores per rank against CPU_SATURATED of the cores) and memory (what the run took per
    rank against what it took plus what stayed available, less MEM_SHORT of the total), shared by the hosts
    on one kernel. What the run took is how far MemAvailable fell from the window's start (a loader's window
    opens with it: shared memory counted once); the emulator's summed RSS where that is not known (an upper
    bound: a page several processes map counts for each). `accelerators` when the probe measured neither."""
    ranks = accelerators * len(ev.hosts)
    fits = []
    if ev.tool_cores > 0 and ev.cores:
        fits.append(CPU_SATURATED * ev.cores / (ev.tool_cores / ranks))
    taken = ev.mem_taken or ev.tool_rss
    if taken and ev.mem_available_min is not None and ev.mem_total:
        usable = ev.mem_available_min + taken - MEM_SHORT * ev.mem_total
        fits.append(max(0.0, usable) / (taken / ranks))
    if not fits:
        return accelerators
    return math.floor(min(fits) / len(ev.hosts))


def _value(samples: list[Sample], metric: str, hosts: list[str]) -> float | None:
    """A loader metric over the run's hosts: host "*" when made, else the hosts' sum (a share of time: their mean;
    the GPU's memory: its most)."""
    mine = [s for s in samples if s.metric == metric and not s.params.get("syscall") and not s.params.get("gpu")]
    everywhere = [s.value for s in mine if s.host == AGGREGATE_HOST]
    per_host = [s.value for s in mine if s.host in hosts]
    if metric in ("gpu_util", "au"):  # shares of time: the hosts' mean
        return statistics.fmean(per_host) if per_host else None
    if metric == "gpu_mem_used":
        return max(per_host, default=None)
    return everywhere[0] if everywhere else (sum(per_host) if per_host else None)


def gpu_verdict(samples: list[Sample], ceiling: float | None, baseline: list[Sample] | None = None) -> dict[str, str]:
    """What limited a real-GPU run (`samples`: its samples; `ceiling`: steady samples/s of the synthetic leg at the
    same GPU count, all hosts; both over the runs' measured windows): the GPUs (busy, or the loader keeping up with
    their ceiling), the client's CPU (the loader's decode: with the cores it would need to feed the ceiling at the
    CPU it spent per sample), the storage (as a probe's), or undetermined; {"side", "reason"} with the evidence."""
    hosts = sorted({s.host for s in samples if s.host != AGGREGATE_HOST})
    rate = _value(samples, "steady_samples_per_s", hosts) or 0.0  # over the measured window, as the ceiling
    util = _value(samples, "gpu_util", hosts)
    memory = _value(samples, "gpu_mem_used", hosts)
    loader = _value([s for s in samples if s.params.get("scope") is None], "cpu_cores", hosts)
    ev = evidence(samples, hosts, baseline=baseline)
    gpu = (f"GPU {util:.0f} % busy" if util is not None else "GPU utilisation not measured (no NVML)") + (
        f", {human(memory, 'B')} of its memory at most" if memory is not None else ""
    )
    keeps = (
        f"{rate:,.0f} images/s of a {ceiling:,.0f} ceiling ({rate / ceiling:.0%})"
        if ceiling
        else f"{rate:,.0f} images/s"
    )
    if (util is not None and util >= GPU_BUSY) or (ceiling and rate >= CEILING_SHARE * ceiling):
        return {"side": "gpu", "reason": f"the GPUs: {gpu}; {keeps}"}
    au = _value(samples, "au", hosts)
    if au is not None and au >= AU_FED:
        # The data came on time; each step took longer than the synthetic leg's (its copy to the GPU from pageable
        # memory, kernel launches from a CPU the decode's workers crowd).
        cpu_side = f"; {_whose(ev)} CPU: {_cpu(ev)}" if ev.cores else ""
        return {
            "side": "gpu",
            "reason": f"the training step: data on time (AU {au:.0f} %), each "
            f"step slower than the synthetic leg's; {keeps}; {gpu}{cpu_side}",
        }
    cpu = f"the loader {loader:.2f} cores" if loader is not None else "the loader's CPU not measured"
    need, cores_needed = "", 0.0
    if loader and rate and ceiling:
        per_sample = loader / rate  # core-seconds per image
        cores_needed = per_sample * ceiling
        need = f"; at {per_sample * 1000:.2f} ms of CPU per image, feeding {ceiling:,.0f} images/s "
        need += f"takes {cores_needed:.1f} cores"
    client = _client(ev)
    if not client and ev.cores and cores_needed >= CPU_SATURATED * ev.cores * ev.kernels:
        # The decode alone would need more of the hosts' cores than a saturated host gives: however fast the
        # storage, this client cannot feed the ceiling (its busy share can stay lower: workers wait on each other).
        client = f"{_whose(ev)} CPU: {ev.cores * ev.kernels} cores, too few for the decode ({_cpu(ev)})"
    saturated, busy, storage = _storage(ev)
    if saturated:
        return {"side": "storage", "reason": f"storage: {storage}; {keeps}; {gpu}"}
    if client:
        return {"side": "client", "reason": f"{client}, {cpu} (decode){need}; {keeps}; {gpu}"}
    if busy:
        return {"side": "storage", "reason": f"storage: {storage}; {keeps}; {gpu}"}
    side = f"neither side: {_whose(ev)} CPU: {_cpu(ev)}, {cpu}{need}" if ev.cores else f"an unknown: {cpu}{need}"
    return {"side": "undetermined", "reason": f"{side}; storage: {storage}; {keeps}; {gpu}"}
