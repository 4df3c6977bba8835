"""Downsampling for display that keeps spikes.

A chart a thousand pixels wide cannot show more than a couple of points per
pixel column, so long series are cut into equal-time buckets and each bucket
keeps its minimum and its maximum, in the order they happened. The shape of
the series and every spike survive (the global minimum and maximum are
always kept exactly); only detail inside a bucket is lost.

Several series sampled at the same times (the columns of a node's system
metrics) share one x axis: :func:`minmax_frame` puts each bucket's earlier
extreme at the first quarter of the bucket and the later one at the third
quarter, for every series, so all series stay aligned for the chart.
Buckets without samples become gaps (NaN), so an outage shows as a hole.

Stacked shares and heatmaps use the bucket mean instead (:func:`mean_frame`):
sums of means are means of sums, which keeps a stacked split consistent.

:func:`compact` and :func:`offsets` turn the results into the chart layer's
JSON (docs/charts.md), for the report and the dashboard alike; for data kept
in segments, :mod:`.rollup` does the same downsampling segment by segment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

DEFAULT_BUCKETS = 2000
SIG_DIGITS = 4


def bucket_index(x: FloatArray, buckets: int) -> tuple[IntArray, float, float]:
    """Bucket of each x (sorted) over ``[x[0], x[-1]]``: (indexes, first x, bucket width)."""
    lo, hi = float(x[0]), float(x[-1])
    width = (hi - lo) / buckets if hi > lo else 1.0
    idx = np.minimum(((x - lo) / width).astype(np.intp), buckets - 1)
    return idx, lo, width


def _segments(idx: IntArray) -> tuple[IntArray, IntArray]:
    """Start offsets and bucket ids of the runs of equal ``idx`` (sorted)."""
    starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    return starts, idx[starts]


def _arg_extreme(y: FloatArray, starts: IntArray, use_max: bool) -> IntArray:
    """Index of the first minimum (or maximum) of y within each segment (no NaN in y)."""
    ufunc = np.maximum if use_max else np.minimum
    ext = ufunc.reduceat(y, starts)
    counts = np.diff(np.r_[starts, len(y)])
    hits = np.flatnonzero(y == np.repeat(ext, counts))
    first_hit = np.searchsorted(hits, starts)
    return hits[first_hit]


def minmax(
    x: npt.ArrayLike, y: npt.ArrayLike, buckets: int = DEFAULT_BUCKETS
) -> tuple[FloatArray, FloatArray]:
    """Keep the minimum and maximum of each equal-time bucket, in time order.

    ``x`` must be sorted. NaN values of ``y`` are dropped. Series of at most
    ``2 * buckets`` points are returned unchanged (apart from NaN). The
    result has at most ``2 * buckets`` points and holds the exact global
    minimum and maximum of ``y``.
    """
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = ~np.isnan(ys)
    xs, ys = xs[keep], ys[keep]
    if len(xs) <= 2 * buckets:
        return xs, ys
    idx, _, _ = bucket_index(xs, buckets)
    starts, _ = _segments(idx)
    lo = _arg_extreme(ys, starts, use_max=False)
    hi = _arg_extreme(ys, starts, use_max=True)
    picks = np.unique(np.concatenate([lo, hi]))  # sorted, so in time order
    return xs[picks], ys[picks]


def minmax_frame(
    x: npt.ArrayLike, columns: Mapping[str, npt.ArrayLike], buckets: int = DEFAULT_BUCKETS
) -> tuple[FloatArray, dict[str, FloatArray]]:
    """Min/max downsampling of several series that share one sorted x axis.

    Returns the shared x (two points per bucket, at its first and third
    quarter) and, per column, the bucket's earlier extreme then its later
    one. Empty buckets are NaN. Short inputs are returned unchanged.
    """
    xs = np.asarray(x, dtype=np.float64)
    cols = {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}
    if len(xs) <= 2 * buckets:
        return xs, cols
    idx, lo, width = bucket_index(xs, buckets)
    out_x = lo + width * (np.repeat(np.arange(buckets), 2) + np.tile([0.25, 0.75], buckets))
    return out_x, {k: _minmax_aligned(idx, v, buckets) for k, v in cols.items()}


def _minmax_aligned(idx: IntArray, y: FloatArray, buckets: int) -> FloatArray:
    """Per bucket: [earlier extreme, later extreme] of y, NaN where a bucket has no value."""
    out = np.full(2 * buckets, np.nan)
    keep = ~np.isnan(y)
    if not keep.any():
        return out
    idx_k, y_k = idx[keep], y[keep]
    starts, ids = _segments(idx_k)
    lo = _arg_extreme(y_k, starts, use_max=False)
    hi = _arg_extreme(y_k, starts, use_max=True)
    first, second = np.minimum(lo, hi), np.maximum(lo, hi)
    out[2 * ids] = y_k[first]
    out[2 * ids + 1] = y_k[second]
    return out


def mean_frame(
    x: npt.ArrayLike, columns: Mapping[str, npt.ArrayLike], buckets: int = DEFAULT_BUCKETS
) -> tuple[FloatArray, dict[str, FloatArray]]:
    """Bucket means of several series sharing one sorted x axis (NaN ignored).

    Returns the bucket centres and, per column, the mean of each bucket (NaN
    for a bucket with no value). Inputs of at most ``buckets`` rows are
    returned unchanged.
    """
    xs = np.asarray(x, dtype=np.float64)
    cols = {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}
    if len(xs) <= buckets:
        return xs, cols
    idx, lo, width = bucket_index(xs, buckets)
    centres = np.asarray(lo + width * (np.arange(buckets) + 0.5), dtype=np.float64)
    return centres, {k: _bucket_mean(idx, v, buckets) for k, v in cols.items()}


def _bucket_mean(idx: IntArray, y: FloatArray, buckets: int) -> FloatArray:
    keep = ~np.isnan(y)
    sums = np.bincount(idx[keep], weights=y[keep], minlength=buckets)
    counts = np.bincount(idx[keep], minlength=buckets)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def insert_gaps(x: FloatArray, y: FloatArray, max_dx: float) -> tuple[FloatArray, FloatArray]:
    """Insert a NaN point where consecutive x are more than ``max_dx`` apart.

    Charts draw lines across missing samples unless told; a NaN breaks the line.
    """
    if len(x) < 2:
        return x, y
    at = np.flatnonzero(np.diff(x) > max_dx) + 1
    if not len(at):
        return x, y
    mid = (x[at - 1] + x[at]) / 2
    return np.insert(x, at, mid), np.insert(y, at, np.nan)


def compact(values: npt.ArrayLike, digits: int = SIG_DIGITS) -> list[float | None]:
    """Values rounded to ``digits`` significant digits of the series' largest, NaN as None."""
    v = np.asarray(values, dtype=np.float64)
    top = float(np.nanmax(np.abs(v))) if len(v) and not np.isnan(v).all() else 0.0
    decimals = max(0, digits - 1 - math.floor(math.log10(top))) if top > 0 else 0
    rounded = np.round(v, decimals)
    gaps = np.isnan(rounded)
    if decimals == 0 and top < 2**62:  # whole numbers as ints, converted by numpy (fast)
        out: list[float | None] = np.where(gaps, 0, rounded).astype(np.int64).tolist()
    elif decimals == 0:
        out = [None if math.isnan(x) else int(x) for x in rounded.tolist()]
    else:
        out = rounded.tolist()
    for i in np.flatnonzero(gaps).tolist():
        out[i] = None
    return out


def offsets(x: npt.ArrayLike, t0: float) -> list[float]:
    """Times as offsets from ``t0``: 1 ms resolution for short spans, 0.1 s for long ones."""
    rel = np.asarray(x, dtype=np.float64) - t0
    span = float(rel[-1] - rel[0]) if len(rel) else 0.0
    out: list[float] = np.round(rel, 3 if span < 600 else 1).tolist()
    return out
