"""GPU figures through NVML, for host telemetry and the loaders (host side; NVML optional).

NVML is the `pynvml` module of the `nvidia-ml-py` package, which loads the driver's
libnvidia-ml. `open_nvml` initialises it once; `read_gpu` reads one GPU's utilization and
memory-controller utilization (%), memory used and total (B), SM clock (Hz), temperature
(°C), power (W) and PCIe receive and transmit throughput (B/s); `GpuProbe` reads every GPU
once an interval in a thread of its own. Nothing is spawned per sample (starting nvidia-smi
initialises NVML each time, tens of milliseconds of CPU), and the thread is apart because
NVML's PCIe counters take 20 ms each to sample. Without the module, the library or a GPU,
`open_nvml` says why in its third value (`{"absent": why}`).
"""

from __future__ import annotations

import importlib
import threading
import time
from typing import Any

NVML_MODULE = "pynvml"  # the nvidia-ml-py package


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def open_nvml(nvml: Any = NVML_MODULE) -> tuple[Any, list[Any], dict[str, Any]]:
    """(NVML, a handle per GPU, what the start record says) or (None, [], {"absent": why}).

    `nvml` is a module with pynvml's interface or the name of one to import; None
    turns GPU telemetry off.
    """
    if nvml is None:
        return None, [], {"absent": "GPU telemetry turned off"}
    if isinstance(nvml, str):
        try:
            nvml = importlib.import_module(nvml)
        except ImportError:
            return None, [], {"absent": f"module {NVML_MODULE} (package nvidia-ml-py) is not installed"}
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:  # no libnvidia-ml (no driver), or a driver that does not answer
        return None, [], {"absent": f"NVML: {exc}"}
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        if not handles:
            nvml.nvmlShutdown()
            return None, [], {"absent": "NVML sees no GPU"}
        info = {
            "source": "nvml",
            "count": len(handles),
            "driver": _text(nvml.nvmlSystemGetDriverVersion()),
            "names": [_text(nvml.nvmlDeviceGetName(h)) for h in handles],
        }
    except nvml.NVMLError as exc:
        nvml.nvmlShutdown()
        return None, [], {"absent": f"NVML: {exc}"}
    return nvml, handles, info


def read_gpu(nvml: Any, index: int, handle: Any) -> dict[str, Any]:
    """One GPU's figures now, in canonical units; a figure the board does not report is None."""

    def get(call, *args):
        try:
            return call(handle, *args)
        except nvml.NVMLError:  # NOT_SUPPORTED on some boards, or a GPU that fell off the bus
            return None

    util = get(nvml.nvmlDeviceGetUtilizationRates)
    memory = get(nvml.nvmlDeviceGetMemoryInfo)
    clock = get(nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_SM)  # MHz
    power = get(nvml.nvmlDeviceGetPowerUsage)  # mW
    rx = get(nvml.nvmlDeviceGetPcieThroughput, nvml.NVML_PCIE_UTIL_RX_BYTES)  # KiB/s over 20 ms
    tx = get(nvml.nvmlDeviceGetPcieThroughput, nvml.NVML_PCIE_UTIL_TX_BYTES)
    uuid = get(nvml.nvmlDeviceGetUUID)
    return {
        "index": index,
        "uuid": None if uuid is None else _text(uuid),
        "util": None if util is None else float(util.gpu),
        "mem_util": None if util is None else float(util.memory),
        "mem_used": None if memory is None else int(memory.used),
        "mem_total": None if memory is None else int(memory.total),
        "sm_clock": None if clock is None else clock * 1_000_000,
        "temp": get(nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU),
        "power": None if power is None else power / 1000,
        "pcie_rx_bw": None if rx is None else rx * 1024,
        "pcie_tx_bw": None if tx is None else tx * 1024,
    }


class GpuProbe(threading.Thread):
    """The latest figures of every GPU, read through NVML once an interval in a thread of its own."""

    def __init__(self, nvml: Any, handles: list[Any], interval: float):
        super().__init__(name="telemetry-gpu", daemon=True)
        self.nvml, self.handles, self.interval = nvml, handles, interval
        self.errors: list[str] = []
        self.cpu_s = 0.0
        self._latest: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop_event = threading.Event()

    def run(self) -> None:
        started = time.thread_time()
        try:
            while True:
                figures = [read_gpu(self.nvml, i, h) for i, h in enumerate(self.handles)]
                with self._lock:
                    self._latest = figures
                if self._stop_event.wait(self.interval):
                    break
        except Exception as exc:  # noqa: BLE001 - a GPU's trouble must not end the host's telemetry
            self.errors.append(f"GPU telemetry stopped: {type(exc).__name__}: {exc}")
        finally:
            self.cpu_s = time.thread_time() - started

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(g) for g in self._latest]

    def close(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError as exc:
            self.errors.append(f"NVML shutdown: {exc}")
