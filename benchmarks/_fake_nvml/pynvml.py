"""``pynvml`` for ``benchmarks/diagnosis.py``: the tests' fake NVML (tests/fakes/pynvml.py),
replaying the GPU traces of a scenario given in ``STEPSCOPE_BENCH_NVML`` (JSON).

Keys, all optional (the fake's A100 traces otherwise): ``gpus`` (count), ``util``
(a trace, or one trace per GPU), ``mem_used_mib`` (a trace), ``mem_growth_mib_s``
(MiB added per second since the first memory reading: a leak). The benchmark puts
this folder first on ``PYTHONPATH`` of ``stepscope run``; its sampler imports it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

_PATH = Path(__file__).resolve().parents[2] / "tests" / "fakes" / "pynvml.py"
_SPEC = importlib.util.spec_from_file_location("_stepscope_fake_pynvml", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
_fake = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = _fake  # dataclasses look their module up there
_SPEC.loader.exec_module(_fake)
globals().update({k: v for k, v in vars(_fake).items() if not k.startswith("__")})

_PROFILE: dict[str, Any] = json.loads(os.environ.get("STEPSCOPE_BENCH_NVML") or "{}")
if "gpus" in _PROFILE:
    os.environ["STEPSCOPE_FAKE_NVML_GPUS"] = str(_PROFILE["gpus"])
_UTIL: list[Any] = _PROFILE.get("util") or []
_PER_GPU = bool(_UTIL) and isinstance(_UTIL[0], list)
if _UTIL and not _PER_GPU:
    _fake.UTIL_GPU[:] = _UTIL
    _fake.UTIL_MEM[:] = [u // 2 for u in _UTIL]
if "mem_used_mib" in _PROFILE:
    _fake.MEM_USED_MIB[:] = _PROFILE["mem_used_mib"]
_GROWTH = float(_PROFILE.get("mem_growth_mib_s", 0.0))
_T0: list[float] = []


def nvmlDeviceGetUtilizationRates(handle: Any) -> Any:
    """The scenario's utilisation: one trace for every GPU, or a trace per GPU."""
    if not _PER_GPU:
        return _fake.nvmlDeviceGetUtilizationRates(handle)
    u = _fake._next(_UTIL[handle.index % len(_UTIL)], "util", handle)
    return _fake.c_nvmlUtilization_t(u, u // 2)


def nvmlDeviceGetMemoryInfo(handle: Any) -> Any:
    """The scenario's memory, plus ``mem_growth_mib_s`` per second of the job (a leak)."""
    info = _fake.nvmlDeviceGetMemoryInfo(handle)
    if not _GROWTH:
        return info
    if not _T0:
        _T0.append(time.monotonic())
    used = min(info.used + int(_GROWTH * (time.monotonic() - _T0[0]) * 2**20), _fake.MEM_TOTAL)
    return _fake.c_nvmlMemory_t(total=_fake.MEM_TOTAL, free=_fake.MEM_TOTAL - used, used=used)
