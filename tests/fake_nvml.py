"""A stand-in for NVML's Python binding (pynvml), for tests on machines without a GPU."""

from __future__ import annotations

import types


class FakeNvml:
    """A stand-in for the pynvml module, with the part of its interface iolab.host.gpu_telemetry uses: there is
    no GPU (and no libnvidia-ml) on the machines these tests run on. Two GPUs; GPU 1 reports no
    utilization and no PCIe throughput (NOT_SUPPORTED), as some boards do. Counts its calls."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1

    class NVMLError(Exception):
        pass

    def __init__(self):
        self.calls: dict[str, int] = {}

    def _count(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1

    def nvmlInit(self):
        self._count("init")

    def nvmlShutdown(self):
        self._count("shutdown")

    def nvmlSystemGetDriverVersion(self):
        return "580.95.05"

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("handle", index)

    def nvmlDeviceGetName(self, handle):
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, handle):
        return f"GPU-00000000-fake-0000-0000-00000000000{handle[1]}"

    def nvmlDeviceGetUtilizationRates(self, handle):
        self._count("utilization")
        if handle[1] == 1:
            raise self.NVMLError("Not Supported")
        return types.SimpleNamespace(gpu=87, memory=40)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return types.SimpleNamespace(used=(30000 if handle[1] == 0 else 1024) << 20, total=81559 << 20, free=0)

    def nvmlDeviceGetClockInfo(self, handle, clock):
        assert clock == self.NVML_CLOCK_SM
        return 1980  # MHz

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == self.NVML_TEMPERATURE_GPU
        return 64  # °C

    def nvmlDeviceGetPowerUsage(self, handle):
        return 512_345  # mW

    def nvmlDeviceGetPcieThroughput(self, handle, counter):
        if handle[1] == 1:
            raise self.NVMLError("Not Supported")
        return {self.NVML_PCIE_UTIL_RX_BYTES: 102_400, self.NVML_PCIE_UTIL_TX_BYTES: 51_200}[counter]  # KiB/s
