"""Host pressure columns of ``system/<node>/``: steal time, run queue, swap (docs/format.md).

Together with ``cpu`` and ``proc_cpu`` they tell whether other processes (or other
virtual machines) take CPU the job needs, and whether the node swaps:

* ``cpu_steal``: time the hypervisor ran other guests on our cores, % of all cores.
* ``run_queue``: tasks runnable at the sample, the sampler itself left out (it is
  running while it reads). More than the cores means someone waits for a core.
* ``swap_used`` and ``swap_in_bps``/``swap_out_bps``: bytes in swap, and bytes read
  from and written to it per second over the interval.

On Linux these are a few small procfs reads (~20 µs per sample, BENCHMARKS.md);
elsewhere psutil gives swap and no run queue (null).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import psutil

from stepscope.sampler._nvml import Row

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class PressureProbe:
    """Reads the pressure counters; :meth:`read` gives the columns since the last read."""

    def __init__(self) -> None:
        self._swap: tuple[float, float, float] | None = None  # used, in, out (cumulative)

    def read(
        self,
        prev_cpus: Sequence[Iterable[float]] | None,
        cpus: Sequence[Iterable[float]],
        dt: float,
    ) -> Row:
        """The pressure columns; rates (steal, swap in/out) are null on the first read."""
        row: Row = {"cpu_steal": steal_percent(prev_cpus, cpus), "run_queue": run_queue()}
        prev, self._swap = self._swap, read_swap()
        row["swap_used"] = self._swap[0]
        if prev is None or dt <= 0:
            return row | {"swap_in_bps": None, "swap_out_bps": None}
        row["swap_in_bps"] = max(self._swap[1] - prev[1], 0.0) / dt  # a reset: no negative rate
        row["swap_out_bps"] = max(self._swap[2] - prev[2], 0.0) / dt
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
    """Runnable tasks now, from ``procs_running`` of /proc/stat, less the sampler itself."""
    try:
        with open("/proc/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None  # not Linux
    at = text.find(b"\nprocs_running ")
    if at < 0:
        return None
    return max(int(text[at + 15 : text.index(b"\n", at + 1)]) - 1, 0)


def read_swap() -> tuple[float, float, float]:
    """(bytes in swap, bytes swapped in, bytes swapped out) since boot."""
    try:
        with open("/proc/vmstat", "rb") as f:
            vmstat = f.read()
        with open("/proc/meminfo", "rb") as f:
            meminfo = f.read()
    except OSError:
        swap = psutil.swap_memory()
        return float(swap.used), float(swap.sin), float(swap.sout)
    total, free = _field(meminfo, b"SwapTotal:"), _field(meminfo, b"SwapFree:")
    used = (total - free) * 1024.0  # meminfo counts kB
    return used, _field(vmstat, b"pswpin ") * _PAGE, _field(vmstat, b"pswpout ") * _PAGE


def _field(text: bytes, name: bytes) -> float:
    """The number after ``name`` at the start of a line of a procfs file (0 if absent)."""
    at = text.find(b"\n" + name)
    if at < 0:
        return 0.0
    return float(text[at + 1 + len(name) :].split(None, 1)[0])
