"""The node's other processes, seen from the job's samples (docs/format.md).

``others_cpu`` is the one definition of what other processes take: the node's CPU
minus the job's and stepscope's own (``own_cpu``, where recorded). The summary,
HostContention and StepOutlier's contention flag use it.

``run_wait_in`` is what a step waited for a core: the run-queue wait the sampler read
per thread (``proc_thread_run_wait``, else the main threads' ``proc_run_wait``) over
the sampling intervals, each interval's wait spread over its time and cut at the
step's ends. A thread that sleeps waits for no core: a ``time.sleep`` stall adds no
wait, whatever the threads did before and after it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from stepscope.analysis.downsample import FloatArray

if TYPE_CHECKING:
    import pandas as pd


def per_core_columns(columns: Iterable[str]) -> int:
    """How many per-core CPU columns (``cpu0``, ``cpu1``...) a system frame has."""
    return sum(1 for c in columns if c[3:].isdigit() and c.startswith("cpu"))


def others_cpu_values(
    cpu: FloatArray, proc_cpu: FloatArray, cores: float, own_cpu: FloatArray | None = None
) -> FloatArray:
    """The one formula: node CPU (% of all cores) minus the job's (``proc_cpu``, % of
    one core summed, over ``cores``) and stepscope's own (``own_cpu``, the same unit;
    0 where not recorded: older jobs counted it among the others), never negative;
    NaN where ``cpu`` or ``proc_cpu`` is missing."""
    own = np.nan_to_num(own_cpu, nan=0.0) if own_cpu is not None else 0.0
    others: FloatArray = np.clip(cpu - (proc_cpu + own) / cores, 0.0, None)
    return others


def others_cpu(rows: pd.DataFrame, cores: float | None = None) -> pd.Series | None:
    """The CPU of the node's other processes, % of all cores: node CPU minus the job's
    (``proc_cpu`` is % of one core, summed). ``cores`` defaults to the per-core columns'
    count; None without the columns or a core count. HostContention uses it too."""
    import pandas as pd

    cores = cores or per_core_columns(rows.columns)
    if not cores or "cpu" not in rows or "proc_cpu" not in rows:
        return None
    own = rows["own_cpu"].to_numpy(np.float64) if "own_cpu" in rows else None
    values = others_cpu_values(
        rows["cpu"].to_numpy(np.float64), rows["proc_cpu"].to_numpy(np.float64), cores, own
    )
    others = pd.Series(values, index=rows.index)
    return others if others.notna().any() else None


def during(
    system: pd.DataFrame, values: pd.Series, starts: FloatArray, ends: FloatArray
) -> FloatArray:
    """The median of ``values`` (aligned with ``system``'s samples) during each
    ``[start, end]``: over the samples whose interval overlaps it (a sample at
    ``time`` covers the ``interval_ms`` before it); NaN where no sample tells."""
    out = np.full(len(starts), np.nan)
    if not len(system) or not len(starts):
        return out
    order = np.argsort(system["time"].to_numpy(np.float64), kind="stable")
    times = system["time"].to_numpy(np.float64)[order]
    series = values.to_numpy(np.float64)[order]
    interval = float(np.nanmedian(system["interval_ms"].to_numpy(np.float64))) / 1000.0
    first = np.searchsorted(times, np.asarray(starts, np.float64), side="left")
    last = np.searchsorted(times, np.asarray(ends, np.float64) + interval, side="right")
    for i, (a, b) in enumerate(zip(first, last, strict=True)):
        window = series[a:b]
        if len(window) and not np.isnan(window).all():
            out[i] = float(np.nanmedian(window))
    return out


def others_during(
    system: pd.DataFrame, starts: FloatArray, ends: FloatArray, cores: float | None = None
) -> FloatArray:
    """Other processes' CPU (% of all cores) during each ``[start, end]`` (median)."""
    others = others_cpu(system, cores) if len(system) else None
    if others is None:
        return np.full(len(starts), np.nan)
    return during(system, others, starts, ends)


def run_wait_seconds(system: pd.DataFrame, start: float, end: float) -> float:
    """Seconds the node's training processes waited, runnable, for a core between
    ``start`` and ``end``: ``proc_run_wait`` over the samples whose interval ends in it
    (summed over the main processes). The part before the first such sample (a
    process starts before the sampler reads it) is given their median rate; 0 where
    no sample tells."""
    if not len(system) or "proc_run_wait" not in system:
        return 0.0
    times = system["time"].to_numpy(np.float64)
    wait = system["proc_run_wait"].to_numpy(np.float64) / 100.0
    seconds = system["interval_ms"].to_numpy(np.float64) / 1000.0
    known = (times > start) & (times <= end) & np.isfinite(wait) & np.isfinite(seconds)
    if not known.any():
        return 0.0
    first = int(np.flatnonzero(known)[np.argmin(times[known])])
    head = max(times[first] - seconds[first] - start, 0.0)
    return float(np.sum(wait[known] * seconds[known]) + head * np.median(wait[known]))


def wait_column(system: pd.DataFrame) -> str | None:
    """The run-queue wait column to read: per thread where recorded, else the main
    threads'; None without either (older jobs, no schedstat)."""
    for name in ("proc_thread_run_wait", "proc_run_wait"):
        if name in system and system[name].notna().any():
            return name
    return None


def run_wait_in(system: pd.DataFrame, starts: FloatArray, ends: FloatArray) -> FloatArray:
    """Seconds the training processes' threads waited, runnable, for a core inside each
    ``[start, end]`` (summed over the node's main processes; :func:`wait_column`).

    A sample at ``time`` covers the ``interval_ms`` before it; its wait is spread
    evenly over that time and the part inside the step counted, so a step is given
    only the wait of the intervals it overlaps, in proportion. NaN where no sample
    with a known wait overlaps the step (unknown, not 0)."""
    out = np.full(len(starts), np.nan)
    column = wait_column(system) if len(system) else None
    if column is None or not len(starts):
        return out
    t1 = system["time"].to_numpy(np.float64)
    dt = system["interval_ms"].to_numpy(np.float64) / 1000.0
    wait = system[column].to_numpy(np.float64) / 100.0 * dt
    known = np.isfinite(t1) & np.isfinite(dt) & (dt > 0) & np.isfinite(wait)
    if not known.any():
        return out
    order = np.argsort(t1[known], kind="stable")
    t1, dt, wait = t1[known][order], dt[known][order], wait[known][order]
    t0 = t1 - dt
    before = np.concatenate([[0.0], np.cumsum(wait)])  # wait of the samples before k

    def cumulative(t: FloatArray) -> FloatArray:
        k = np.searchsorted(t1, t, side="left")  # the first sample ending at or after t
        inside = np.minimum(k, len(t1) - 1)
        part = np.clip((t - t0[inside]) / dt[inside], 0.0, 1.0) * wait[inside]
        return np.asarray(before[k] + np.where(k < len(t1), part, 0.0), np.float64)

    s, e = np.asarray(starts, np.float64), np.asarray(ends, np.float64)
    first = np.searchsorted(t1, s, side="right")  # samples ending after the start...
    told = (first < len(t1)) & (t0[np.minimum(first, len(t1) - 1)] < e)  # ...begun before its end
    return np.where(told, np.maximum(cumulative(e) - cumulative(s), 0.0), np.nan)
