"""GPU metrics through NVML (``pynvml`` from nvidia-ml-py), read by the sampler process.

Without a GPU or driver ``nvmlInit()`` raises ``pynvml.NVMLError``
(``LibraryNotFound``, ``DriverNotLoaded``, ...). That is the normal case on a CPU
node, so :meth:`Gpus.open` returns None without a word and the sampler writes no
GPU columns. Once open, a metric a GPU does not support (power on some boards)
or a GPU that fell off the bus reads as null: never an exception, never a log line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar

T = TypeVar("T")
Value = float | int | str | None
Row = dict[str, Value]


@dataclass(frozen=True)
class GpuInfo:
    """Static facts about one GPU, as written to ``nodes/<node>.json``."""

    index: int
    name: str
    mem_total: float


class Gpus:
    """The GPUs of this node; :meth:`sample` adds their ``gpu<i>_*`` columns to a row."""

    def __init__(self, nvml: ModuleType, handles: list[object], info: list[GpuInfo]) -> None:
        self._nvml = nvml
        self._handles = handles
        self.info = info

    @classmethod
    def open(cls) -> Gpus | None:
        """Initialise NVML; None when there is no NVML library, driver or GPU."""
        try:
            import pynvml
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError:
            return None
        try:
            gpus = cls._discover(pynvml)
        except pynvml.NVMLError:
            gpus = None
        if gpus is None:
            pynvml.nvmlShutdown()
        return gpus

    @classmethod
    def _discover(cls, nvml: ModuleType) -> Gpus | None:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        if not handles:
            return None
        info = [_info(nvml, i, handle) for i, handle in enumerate(handles)]
        return cls(nvml, handles, info)

    def sample(self, row: Row) -> None:
        """Add the ``gpu<i>_*`` columns of docs/format.md to ``row``."""
        for gpu, handle in zip(self.info, self._handles, strict=True):
            row.update(self._read(gpu, handle))

    def close(self) -> None:
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()

    def _read(self, gpu: GpuInfo, handle: object) -> Row:
        nvml = self._nvml
        util = self._call(nvml.nvmlDeviceGetUtilizationRates, handle)
        mem = self._call(nvml.nvmlDeviceGetMemoryInfo, handle)
        power_mw = self._call(nvml.nvmlDeviceGetPowerUsage, handle)
        temp = self._call(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
        total = float(mem.total) if mem is not None else gpu.mem_total
        used = float(mem.used) if mem is not None else None
        p = f"gpu{gpu.index}_"
        return {
            p + "util": float(util.gpu) if util is not None else None,
            p + "mem_used": used,
            p + "mem_total": total,
            # docs/format.md: memory used, % of total (NVML's utilization.memory is
            # memory-controller activity, a different quantity).
            p + "mem_util": 100.0 * used / total if used is not None and total else None,
            p + "power_w": power_mw / 1000.0 if power_mw is not None else None,
            p + "temp_c": float(temp) if temp is not None else None,
        }

    def _call(self, fn: Callable[..., T], *args: object) -> T | None:
        try:
            return fn(*args)
        except self._nvml.NVMLError:
            return None


def _info(nvml: ModuleType, index: int, handle: object) -> GpuInfo:
    name = nvml.nvmlDeviceGetName(handle)
    if isinstance(name, bytes):  # nvidia-ml-py < 11.515 returned bytes
        name = name.decode(errors="replace")
    return GpuInfo(index, str(name), float(nvml.nvmlDeviceGetMemoryInfo(handle).total))
