"""A stand-in for ``pynvml`` (nvidia-ml-py) on machines without a GPU.

It implements the subset of the real API that stepscope calls, with the same
names, argument order, units and errors, and replays fixed per-GPU traces of an
8x A100-SXM4-40GB node in training: utilisation 85-98 % with dips to 0 (data
stalls), memory ~31 GiB of 40 GiB, power 60-400 W following utilisation, 61-66 C.
These traces are hand-written to match the ranges seen on such nodes, not a
capture: replace them with a real one when a GPU machine is at hand.

``STEPSCOPE_FAKE_NVML_GPUS`` sets the number of GPUs (default 8). With 0,
``nvmlInit`` raises ``NVMLError_LibraryNotFound``, as the real module does on
a machine without the NVIDIA driver. Tests put ``tests/fakes`` first on
``PYTHONPATH`` (subprocesses) or install this module in ``sys.modules``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

NVML_TEMPERATURE_GPU = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_LIBRARY_NOT_FOUND = 12

NAME = "NVIDIA A100-SXM4-40GB"
MEM_TOTAL = 42949672960  # 40 GiB, as NVML reports it
# Per-sample traces (one value per nvml call), replayed in a cycle;
# GPU i starts i samples later, as the ranks of a real job are not in lockstep.
UTIL_GPU = [92, 95, 97, 88, 0, 94, 96, 93, 91, 97, 98, 0, 0, 85, 95, 96, 97, 94, 90, 93]
UTIL_MEM = [41, 44, 46, 38, 0, 43, 45, 42, 40, 46, 47, 0, 0, 35, 44, 45, 46, 43, 39, 42]
MEM_USED_MIB = [31742, 31742, 31744, 31744, 31744, 31750, 31750, 31750, 31746, 31746]
POWER_MW = [
    356120,
    371480,
    389950,
    318400,
    62830,
    362770,
    380110,
    352690,
    341250,
    392640,
    398010,
    64150,
    63420,
    297880,
    369330,
    376540,
    384220,
    360870,
    330150,
    349610,
]
TEMP_C = [61, 62, 63, 63, 62, 62, 63, 64, 64, 65, 66, 65, 64, 63, 63, 64, 65, 65, 64, 64]


class NVMLError(Exception):
    """Base of NVML errors; ``NVMLError(code)`` builds the matching subclass, as in pynvml."""

    _by_code: dict[int, type[NVMLError]] = {}
    value: int

    def __new__(cls, value: int = 999) -> NVMLError:
        typ = NVMLError._by_code.get(value, cls) if cls is NVMLError else cls
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML Error with code {self.value}")


def _error_class(name: str, code: int, message: str) -> type[NVMLError]:
    def new(cls: type[NVMLError], *args: Any) -> NVMLError:
        return NVMLError.__new__(cls, code)

    cls = type(name, (NVMLError,), {"__new__": new, "__module__": __name__})
    NVMLError._by_code[code] = cls
    _MESSAGES[code] = message
    return cls


_MESSAGES: dict[int, str] = {}
NVMLError_Uninitialized = _error_class("NVMLError_Uninitialized", 1, "Uninitialized")
NVMLError_InvalidArgument = _error_class("NVMLError_InvalidArgument", 2, "Invalid Argument")
NVMLError_LibraryNotFound = _error_class(
    "NVMLError_LibraryNotFound", 12, "NVML Shared Library Not Found"
)


@dataclass
class c_nvmlUtilization_t:  # the real names
    gpu: int
    memory: int


@dataclass
class c_nvmlMemory_t:  # the real names
    total: int
    free: int
    used: int


@dataclass(frozen=True)
class _Handle:
    index: int


class _State:
    initialised = 0  # nvmlInit/nvmlShutdown nest, as in NVML
    calls: dict[tuple[str, int], int] = {}


def _gpu_count() -> int:
    return int(os.environ.get("STEPSCOPE_FAKE_NVML_GPUS", "8"))


def _next(trace: list[int], what: str, handle: _Handle) -> int:
    if not _State.initialised:
        raise NVMLError_Uninitialized()
    n = _State.calls.get((what, handle.index), 0)
    _State.calls[(what, handle.index)] = n + 1
    return trace[(n + handle.index) % len(trace)]


def nvmlInit() -> None:
    if _gpu_count() <= 0:
        raise NVMLError_LibraryNotFound()
    _State.initialised += 1


def nvmlShutdown() -> None:
    if not _State.initialised:
        raise NVMLError_Uninitialized()
    _State.initialised -= 1


def nvmlDeviceGetCount() -> int:
    if not _State.initialised:
        raise NVMLError_Uninitialized()
    return _gpu_count()


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
    if not 0 <= index < nvmlDeviceGetCount():
        raise NVMLError_InvalidArgument()
    return _Handle(index)


def nvmlDeviceGetName(handle: _Handle) -> str:
    _next([0], "name", handle)
    return NAME


def nvmlDeviceGetUtilizationRates(handle: _Handle) -> c_nvmlUtilization_t:
    return c_nvmlUtilization_t(_next(UTIL_GPU, "util", handle), _next(UTIL_MEM, "umem", handle))


def nvmlDeviceGetMemoryInfo(handle: _Handle) -> c_nvmlMemory_t:
    used = _next(MEM_USED_MIB, "mem", handle) * 1024 * 1024
    return c_nvmlMemory_t(total=MEM_TOTAL, free=MEM_TOTAL - used, used=used)


def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
    """Milliwatts, as NVML reports them."""
    return _next(POWER_MW, "power", handle)


def nvmlDeviceGetTemperature(handle: _Handle, sensor: int) -> int:
    if sensor != NVML_TEMPERATURE_GPU:
        raise NVMLError_InvalidArgument()
    return _next(TEMP_C, "temp", handle)
