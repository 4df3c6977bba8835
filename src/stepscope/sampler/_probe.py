"""System metrics of a node: psutil and NVML counters -> rows of ``system/<node>/``.

:class:`SystemProbe` turns two readings of the counters into one row (docs/format.md);
:func:`rows_to_batches` gives rows their Arrow types. The loop is :mod:`.sampler_main`.
What is counted, so that nothing is counted twice:

* disks: whole physical disks. On Linux a disk is physical when ``/sys/block/<name>``
  exists and does not resolve under ``/sys/devices/virtual``: partitions (already in
  their disk's counters), ``loop*``, ``ram*``, ``zram*``, ``dm-*`` (LVM, dm-crypt) and
  ``md*`` (RAID) are left out: their I/O reaches a physical disk too, or none at all.
* network: all but loopback; when a physical NIC exists, virtual ones (``veth``,
  bridges, ``ifb``, VLANs, tunnels) are left out too, as their traffic crosses the
  physical NIC as well. In a container where every NIC is virtual, all count.
* ``mem_used`` is ``total - available``, consistent with ``mem_percent``.
* ``proc_cpu``/``proc_rss`` sum the watched process and all its descendants; RSS
  counts shared pages (forked data-loader workers) once per process. ``proc_cpu_main``
  leaves out the pool children (data-loader workers; see ``_roles``). The tree, its
  I/O (``proc_read_bps``/``proc_write_bps``) and its threads in disk sleep
  (``proc_io_wait``) are read by :class:`ProcessTree` (``_tree``).

Batches round percentages to 0.1 and byte rates to whole bytes/s: finer digits are
noise (CPU time is counted in 10 ms ticks), and Parquet's dictionary encoding then
stores most values in 1-2 bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import psutil

# Re-exported, the sampler's API: "as" marks them so for strict type checks.
from stepscope.sampler._encoding import ACCEPTED_INTERVALS_MS as ACCEPTED_INTERVALS_MS
from stepscope.sampler._encoding import rows_to_batches as rows_to_batches
from stepscope.sampler._encoding import schema_for as schema_for
from stepscope.sampler._encoding import validate_interval_ms as validate_interval_ms
from stepscope.sampler._nvml import Gpus, Row
from stepscope.sampler._pressure import PressureProbe
from stepscope.sampler._tasks import descendant_pids as descendant_pids
from stepscope.sampler._tree import ProcessTree as ProcessTree

_LOOPBACK = ("lo", "lo0")


class CpuTimes(Protocol):
    """One core's times from ``psutil.cpu_times(percpu=True)``: seconds by field, iterable
    (``iowait``, ``guest`` and ``guest_nice`` only on Linux, read with getattr)."""

    @property
    def idle(self) -> float: ...

    def __iter__(self) -> Iterator[float]: ...


@dataclass
class _Reading:
    """Cumulative counters at one instant (monotonic seconds)."""

    mono: float
    cpus: list[CpuTimes]
    disks: dict[str, tuple[int, int]]
    nics: dict[str, tuple[int, int]]


class SystemProbe:
    """Reads the host's counters; each :meth:`read` returns the rates since the last one."""

    def __init__(self, watch_pid: int | None = None, gpus: Gpus | None = None) -> None:
        self.gpus = gpus
        self.processes = ProcessTree(watch_pid)
        self.pressure = PressureProbe()
        self._prev: _Reading | None = None

    def read(self, mono: float) -> Row:
        """The metric columns of one sample taken at ``mono``; rates are null the first time."""
        cur = _Reading(mono, psutil.cpu_times(percpu=True), _disks(), _nics())
        prev, self._prev = self._prev, cur
        dt = cur.mono - prev.mono if prev is not None else 0.0
        row = _cpu_columns(prev.cpus if prev and dt > 0 else None, cur.cpus)
        disk_r, disk_w = _rates(prev.disks if prev else None, cur.disks, dt)
        net_rx, net_tx = _rates(prev.nics if prev else None, cur.nics, dt)
        row |= {"disk_read_bps": disk_r, "disk_write_bps": disk_w}
        row |= {"net_rx_bps": net_rx, "net_tx_bps": net_tx}
        row["proc_cpu"], row["proc_rss"] = self.processes.read(dt if prev else None)
        row["proc_cpu_main"] = self.processes.main_cpu
        row["proc_run_wait"] = self.processes.run_wait
        row["proc_thread_run_wait"] = self.processes.thread_run_wait
        row["proc_pool_run_wait"] = self.processes.pool_run_wait
        row["proc_io_wait"] = self.processes.io_wait
        row["proc_read_bps"], row["proc_write_bps"] = self.processes.io_bps
        # memory (mem_*), steal, run queue and swap: docs/format.md
        row |= self.pressure.read(prev.cpus if prev and dt > 0 else None, cur.cpus, dt)
        if self.gpus is not None:
            self.gpus.sample(row)
        return row


# nowrap=False: a third cheaper, and a counter that wraps or resets gives one rate of 0
# (see _rates), not a wrong one.
def _disks() -> dict[str, tuple[int, int]]:
    counters = psutil.disk_io_counters(perdisk=True, nowrap=False) or {}
    return {n: (c.read_bytes, c.write_bytes) for n, c in counters.items() if _is_physical_disk(n)}


def _nics() -> dict[str, tuple[int, int]]:
    counters = psutil.net_io_counters(pernic=True, nowrap=False)
    names = [n for n in counters if n not in _LOOPBACK]
    physical = [n for n in names if not _is_virtual_nic(n)]
    return {n: (counters[n].bytes_recv, counters[n].bytes_sent) for n in physical or names}


@lru_cache(maxsize=1024)  # devices are few; /sys is read once per name
def _is_physical_disk(name: str) -> bool:
    if not os.path.isdir("/sys/block"):  # not Linux: trust psutil's list minus RAM disks
        return not name.startswith(("ram", "md"))
    link = f"/sys/block/{name}"
    return os.path.exists(link) and "/devices/virtual/" not in os.path.realpath(link)


@lru_cache(maxsize=1024)
def _is_virtual_nic(name: str) -> bool:
    link = f"/sys/class/net/{name}"
    return os.path.exists(link) and "/devices/virtual/" in os.path.realpath(link)


@lru_cache(maxsize=8)
def _core_names(count: int) -> tuple[str, ...]:
    return tuple(f"cpu{i}" for i in range(count))


def _cpu_columns(prev: list[CpuTimes] | None, cur: list[CpuTimes]) -> Row:
    """Total, iowait and per-core utilisation from two readings of ``/proc/stat``."""
    names = _core_names(len(cur))
    if prev is None or len(prev) != len(cur):  # first sample, or a core went off/online
        return {"cpu": None, "cpu_iowait": None} | dict.fromkeys(names)
    deltas = [_cpu_delta(a, b) for a, b in zip(prev, cur, strict=True)]
    busy, iowait, total = (sum(column) for column in zip(*deltas, strict=True))
    row: Row = {"cpu": _percent(busy, total), "cpu_iowait": _percent(iowait, total)}
    row.update(zip(names, (_percent(b, t) for b, _, t in deltas), strict=True))
    return row


def _cpu_delta(before: CpuTimes, after: CpuTimes) -> tuple[float, float, float]:
    """(busy, iowait, total) seconds of one core between two readings, as psutil counts them."""
    total = _cpu_total(after) - _cpu_total(before)
    idle = after.idle - before.idle
    iowait = getattr(after, "iowait", 0.0) - getattr(before, "iowait", 0.0)
    return max(total - idle - iowait, 0.0), max(iowait, 0.0), total


def _cpu_total(times: CpuTimes) -> float:
    # Linux counts guest time inside user and nice as well: do not count it twice.
    return float(sum(times)) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)


def _percent(part: float, total: float) -> float | None:
    return min(100.0 * part / total, 100.0) if total > 0 else None


def _rates(
    prev: dict[str, tuple[int, int]] | None, cur: dict[str, tuple[int, int]], dt: float
) -> tuple[float | None, float | None]:
    """Bytes/s of two counters summed over the devices present in both readings."""
    if prev is None or dt <= 0:
        return None, None
    pairs = [(cur[n], prev[n]) for n in cur.keys() & prev.keys()]
    first = sum(max(c[0] - p[0], 0) for c, p in pairs)  # a reset counter is no negative rate
    second = sum(max(c[1] - p[1], 0) for c, p in pairs)
    return first / dt, second / dt
