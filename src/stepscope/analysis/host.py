"""The node's other processes, seen from the job's samples (docs/format.md).

``others_cpu`` is the one definition of what other processes take: the node's CPU
minus the job's. The summary, HostContention and StepOutlier's contention flag
use it.
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


def others_cpu_values(cpu: FloatArray, proc_cpu: FloatArray, cores: float) -> FloatArray:
    """The one formula: node CPU (% of all cores) minus the job's (``proc_cpu``, % of
    one core summed, over ``cores``), never negative; NaN where either is missing."""
    others: FloatArray = np.clip(cpu - proc_cpu / cores, 0.0, None)
    return others


def others_cpu(rows: pd.DataFrame, cores: float | None = None) -> pd.Series | None:
    """The CPU of the node's other processes, % of all cores: node CPU minus the job's
    (``proc_cpu`` is % of one core, summed). ``cores`` defaults to the per-core columns'
    count; None without the columns or a core count. HostContention uses it too."""
    import pandas as pd

    cores = cores or per_core_columns(rows.columns)
    if not cores or "cpu" not in rows or "proc_cpu" not in rows:
        return None
    values = others_cpu_values(
        rows["cpu"].to_numpy(np.float64), rows["proc_cpu"].to_numpy(np.float64), cores
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


def run_wait_during(system: pd.DataFrame, starts: FloatArray, ends: FloatArray) -> FloatArray:
    """Seconds per second the node's training loops waited, runnable, for a core
    (``proc_run_wait`` / 100, summed over its main processes) during each
    ``[start, end]`` (median); NaN without the column (older jobs, no schedstat)."""
    if "proc_run_wait" not in system or not system["proc_run_wait"].notna().any():
        return np.full(len(starts), np.nan)
    return during(system, system["proc_run_wait"].astype("float64") / 100.0, starts, ends)
