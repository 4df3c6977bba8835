"""Slow trends over a whole job: robust slopes and compact summaries.

A drift rule (GPUMemoryIncrease) keeps one point per window and key (a GPU):
the window's median and its middle time. The live runner keeps these points for
the data that left its buffer (``NodeRule.summary``, ``RuleInput.history``) and
:func:`compact` halves their resolution past ``CAP`` points per key, so the cost
of judging the trend stays flat however old the job is. The trend is the
Theil-Sen slope (the median of the slopes between every pair of points): a
single jump, a warm-up or an outlier window moves it little, noise averages out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis.downsample import FloatArray

#: Points kept per key (a day of 4-minute windows is ~350): O(CAP^2) to fit.
CAP = 256
COLUMNS = ["key", "time", "value", "n"]


def theil_sen(t: FloatArray, v: FloatArray) -> float:
    """The median of the slopes between every pair of points with distinct times
    (NaN values skipped; NaN with fewer than two such points)."""
    ok = ~(np.isnan(t) | np.isnan(v))
    t, v = t[ok], v[ok]
    i, j = np.triu_indices(len(t), k=1)
    dt = t[j] - t[i]
    keep = dt > 0
    if not keep.any():
        return float("nan")
    return float(np.median((v[j] - v[i])[keep] / dt[keep]))


def trend_rise(points: pd.DataFrame) -> float:
    """The rise of the robust line through ``points`` (``time``, ``value``) from the
    first point to the last (NaN with fewer than three points)."""
    if len(points) < 3:
        return float("nan")
    t = points["time"].to_numpy(np.float64)
    slope = theil_sen(t, points["value"].to_numpy(np.float64))
    return slope * float(t.max() - t.min())


def compact(points: pd.DataFrame, cap: int = CAP) -> pd.DataFrame:
    """At most ``cap`` points per key: while more, neighbours are merged in pairs
    (mean time and value, summed counts), oldest first."""
    parts = []
    for _, group in points.sort_values(["key", "time"]).groupby("key", sort=True):
        while len(group) > cap:
            group = _halve(group)
        parts.append(group)
    return pd.concat(parts, ignore_index=True) if parts else points[COLUMNS].iloc[:0]


def _halve(group: pd.DataFrame) -> pd.DataFrame:
    pair = np.arange(len(group)) // 2
    return (
        group.groupby(pair)
        .agg(key=("key", "first"), time=("time", "mean"), value=("value", "mean"), n=("n", "sum"))
        .reset_index(drop=True)
    )


def extend(history: pd.DataFrame | None, new: pd.DataFrame | None) -> pd.DataFrame | None:
    """``history`` followed by ``new``, compacted."""
    frames = [f for f in (history, new) if f is not None and len(f)]
    if not frames:
        return history
    return compact(pd.concat(frames, ignore_index=True))
