"""Host pressure columns of ``system/<node>/``: steal time, run queue, swap (docs/format.md).

Together with ``cpu`` and ``proc_cpu`` they tell whether other processes (or other
virtual machines) take CPU the job needs, and whether the node swaps:

* ``cpu_steal``: time the hypervisor ran other guests on our cores, % of all cores.
* ``run_queue``: tasks runnable at the sample, the sampler itself left out (it is
  running while it reads). More than the cores means someone waits for a core.
* ``swap_used`` and ``swap_in_bps``/``swap_out_bps``: bytes in swap, and bytes read
  from and written to it per second over the interval.

The memory columns (``mem_used``, ``mem_percent``) come from the same read of
/proc/meminfo as ``swap_used``: one read where psutil would make it twice. /proc/vmstat
(swap in/out) is read only while the node has swap: without any, both rates are 0.
Elsewhere psutil gives memory and swap, and the run queue is null.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import psutil

from stepscope.sampler._nvml import Row

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class PressureProbe:
    """Reads the memory and pressure counters; :meth:`read` gives the columns."""

    def __init__(self) -> None:
        self._swapped: tuple[float, float] | None = None  # bytes in, out (cumulative)

    def read(
        self,
        prev_cpus: Sequence[Iterable[float]] | None,
        cpus: Sequence[Iterable[float]],
        dt: float,
    ) -> Row:
        """Memory and pressure columns; rates (steal, swap in/out) are null the first time."""
        row = memory_columns()
        row |= {"cpu_steal": steal_percent(prev_cpus, cpus), "run_queue": run_queue()}
        prev, self._swapped = self._swapped, swapped(row["swap_total"] != 0)
        del row["swap_total"]
        if prev is None or dt <= 0:
            return row | {"swap_in_bps": None, "swap_out_bps": None}
        row["swap_in_bps"] = max(self._swapped[0] - prev[0], 0.0) / dt  # a reset: not negative
        row["swap_out_bps"] = max(self._swapped[1] - prev[1], 0.0) / dt
        return row


def steal_percent(
    prev: Sequence[Iterable[float]] | None, cur: Sequence[Iterable[float]]
) -> float | None:
    """Steal time between two readings of the per-core times, % of all cores."""
    if prev is None or len(prev) != len(cur):
        return None
    steal = total = 0.0
    for before, after in zip(prev, cur, strict=True):
        steal += getattr(after, "steal", 0.0) - getattr(before, "steal", 0.0)
        total += _total(after) - _total(before)
    return min(max(100.0 * steal / total, 0.0), 100.0) if total > 0 else None


def _total(times: Iterable[float]) -> float:
    # As the sampler's cpu column counts it: guest time is inside user and nice already.
    return float(sum(times)) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)


def run_queue() -> int | None:
    """Runnable tasks now (the 4th field of /proc/loadavg, ``running/total``, the same
    count as ``procs_running`` of /proc/stat, in a smaller file), less the sampler."""
    try:
        with open("/proc/loadavg", "rb") as f:
            running = f.read().split()[3].split(b"/")[0]
    except (OSError, IndexError):
        return None  # not Linux
    return max(int(running) - 1, 0)


def memory_columns() -> Row:
    """``mem_used`` (total - available), ``mem_percent``, ``swap_used``; and
    ``swap_total`` for :class:`PressureProbe` (bytes)."""
    try:
        with open("/proc/meminfo", "rb") as f:
            info = f.read()
    except OSError:
        info = b""
    total, available = _field(info, b"MemTotal:"), _field(info, b"MemAvailable:")
    if not total or available is None:  # not Linux, or a kernel before 3.14: psutil computes it
        mem, swap = psutil.virtual_memory(), psutil.swap_memory()
        used = float(mem.total - mem.available)
        return {"mem_used": used, "mem_percent": float(mem.percent),
                "swap_used": float(swap.used), "swap_total": float(swap.total)}  # fmt: skip
    swap_total, swap_free = _field(info, b"SwapTotal:") or 0.0, _field(info, b"SwapFree:") or 0.0
    used = (total - available) * 1024.0  # meminfo counts kB
    return {"mem_used": used, "mem_percent": round(100.0 * (total - available) / total, 1),
            "swap_used": (swap_total - swap_free) * 1024.0, "swap_total": swap_total}  # fmt: skip


def swapped(has_swap: bool) -> tuple[float, float]:
    """(bytes swapped in, bytes swapped out) since boot; (0, 0) without swap: the
    counters cannot move, and /proc/vmstat is the dearest file read per sample."""
    if not has_swap:
        return 0.0, 0.0
    try:
        with open("/proc/vmstat", "rb") as f:
            vmstat = f.read()
    except OSError:
        swap = psutil.swap_memory()
        return float(swap.sin), float(swap.sout)
    return (_field(vmstat, b"pswpin ") or 0.0) * _PAGE, (_field(vmstat, b"pswpout ") or 0.0) * _PAGE


def _field(text: bytes, name: bytes) -> float | None:
    """The number after ``name`` at the start of a line of a procfs file (None if absent)."""
    at = 0 if text.startswith(name) else text.find(b"\n" + name) + 1
    if at == 0 and not text.startswith(name):
        return None
    return float(text[at + len(name) :].split(None, 1)[0])


def thread_delays(pid: int) -> dict[int, float]:
    """Seconds each thread of ``pid`` has waited, runnable, for a core (the second
    field of ``/proc/<pid>/task/<tid>/schedstat``), by thread id; empty where the
    kernel does not say or the process has exited. One small file per thread: the
    training loop's and torch's few, read by the sampler, never by the training."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    out = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                out[int(tid)] = int(f.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue  # it has exited
    return out


def run_delay(pid: int) -> float | None:
    """Seconds the main thread of ``pid`` has waited, runnable, for a core (Linux
    schedstat's ``run_delay``); None where the kernel does not say or it has exited."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None
