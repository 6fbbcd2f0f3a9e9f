"""Provenance of a host and of the storage under a path (runs on the hosts, stdlib only).

Every run records these beside the tool's output, so a result can be traced to
the kernel, CPU, memory, mount and device settings it was measured on.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import iolab


def _read(path: str | Path, default: str = "") -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes: MemTotal, Cached, Dirty, ..."""
    values = {}
    for line in _read("/proc/meminfo").splitlines():
        match = re.match(r"(\w+):\s+(\d+)(?: kB)?", line)
        if match:
            values[match.group(1)] = int(match.group(2)) * 1024
    return values


def _os_release() -> str:
    match = re.search(r'^PRETTY_NAME="?([^"\n]*)', _read("/etc/os-release"), re.MULTILINE)
    return match.group(1) if match else platform.platform()


def cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def _mount(path: str) -> dict[str, Any]:
    if not shutil.which("findmnt"):
        return {}
    out = subprocess.run(
        ["findmnt", "--json", "--target", path, "-o", "TARGET,SOURCE,FSTYPE,OPTIONS,ID"], capture_output=True, text=True
    )
    if out.returncode != 0:
        return {}
    found = json.loads(out.stdout).get("filesystems", [{}])[0]
    mount = {key: found.get(key) for key in ("target", "source", "fstype", "options")}
    # Who mounted it and how (a storage role's record: backend, mapping method, read-only, snapshot).
    from iolab.host import mounts

    record = mounts.record_for({**mount, "id": found.get("id")}) if found.get("id") is not None else None
    if record:
        mount["iolab"] = {k: v for k, v in record.items() if k not in ("target", "source", "fstype", "recorded_at")}
    return mount


def _block_queue(path: str) -> dict[str, Any]:
    """Read-ahead and scheduler of the block device under `path`, if it has one."""
    dev = os.stat(path).st_dev
    sysdev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if not sysdev.exists():
        return {}
    queue = sysdev / "queue" if (sysdev / "queue").exists() else sysdev.parent / "queue"
    scheduler = re.search(r"\[(\S+)\]", _read(queue / "scheduler"))
    return {
        "device": sysdev.resolve().name,
        "read_ahead_kb": int(_read(queue / "read_ahead_kb", "0") or 0),
        "scheduler": scheduler.group(1) if scheduler else _read(queue / "scheduler") or None,
        "rotational": _read(queue / "rotational") == "1",
    }


def _gpus(nvml: Any = "pynvml") -> list[dict[str, str]]:
    """Each GPU's model, driver and memory (MiB), through NVML (iolab.host.gpu_telemetry); none without it."""
    from iolab.host import gpu_telemetry

    nvml, handles, info = gpu_telemetry.open_nvml(nvml)
    if nvml is None:
        return []
    try:
        return [
            {
                "model": name,
                "driver": info["driver"],
                "memory": f"{(gpu_telemetry.read_gpu(nvml, i, h)['mem_total'] or 0) >> 20} MiB",
            }
            for i, (h, name) in enumerate(zip(handles, info["names"], strict=True))
        ]
    finally:
        nvml.nvmlShutdown()


def collect(target: str | None = None, results: str | Path | None = None) -> dict[str, Any]:
    """The host's facts, the mount under `target` (the data) and under `results` (where the run's files go:
    MLPerf Storage's rules want them on another file system than the data)."""
    mem = meminfo()
    facts: dict[str, Any] = {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "os": _os_release(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "numa_nodes": len(list(Path("/sys/devices/system/node").glob("node[0-9]*"))),
        "memory_bytes": mem.get("MemTotal"),
        "python": platform.python_version(),
        "iolab_version": iolab.__version__,
        "sysctl": {k: _read(f"/proc/sys/vm/{k}") for k in ("dirty_ratio", "dirty_background_ratio", "swappiness")},
        "gpus": _gpus(),
    }
    if target:
        facts["mount"] = _mount(target)
        facts["block"] = _block_queue(target)
    if results:
        facts["results_mount"] = {k: v for k, v in _mount(str(results)).items() if k != "iolab"}
    return facts


def probe(mountpoint: str) -> dict[str, Any]:
    """What a storage role's preflight needs, in one call: who we are, memory, what is mounted there."""
    mounted = None
    if shutil.which("findmnt"):
        out = subprocess.run(
            ["findmnt", "--json", "--mountpoint", mountpoint, "-o", "SOURCE,FSTYPE,OPTIONS"],
            capture_output=True,
            text=True,
        )
        if out.returncode == 0:
            mounted = json.loads(out.stdout)["filesystems"][0]
    return {
        "uid": os.geteuid(),
        "memory_bytes": meminfo().get("MemTotal", 0),
        "mounted": mounted,
        "exists": os.path.isdir(mountpoint),
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m iolab.host.facts")
    parser.add_argument("path", nargs="?", help="also describe the storage under this path")
    parser.add_argument("--probe", metavar="MOUNTPOINT", help="only what a storage preflight needs")
    opts = parser.parse_args(argv)
    print(json.dumps(probe(opts.probe) if opts.probe else collect(opts.path), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
