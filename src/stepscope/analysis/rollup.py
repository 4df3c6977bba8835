"""The downsampling of :mod:`.downsample` in two passes, so that old segments are reduced once.

A chart of a whole job cuts ``[first, last]`` into equal-time buckets; that grid
moves with every new sample of a running job, so its buckets cannot be kept. A
finer grid fixed in absolute time can: :func:`summarize` reduces the rows of one
part of a stream (a segment) to fine buckets ``floor(x / width)``, ``width`` a
power of two seconds, keeping per column what the charts need: the earlier and
the later extreme (as :func:`.downsample.minmax_frame` keeps them), the sum and
the count. Summaries of a finished segment never change; :func:`combine` joins
those of every part and :class:`Rolled` reduces them onto the chart's buckets.

The answer equals the one-pass answer except at bucket borders: a fine bucket
counts wholly in the chart bucket that holds its middle, so values from within
half a fine bucket (at most 1/16 of a chart bucket, :data:`FINE_PER_BUCKET`) of
a border can land in the neighbour bucket. Extremes (every spike) and sums are kept
exactly; :class:`Rows` is the one-pass reducer with the same methods.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope.analysis.downsample import FloatArray, IntArray, mean_frame, minmax_frame

FINE_PER_BUCKET = 8  # at least this many fine buckets per chart bucket
MIN_ROWS_PER_FINE = 4  # below this many rows per fine bucket, one pass is as cheap


def fine_width(lo: float, hi: float, buckets: int, rows: int) -> float | None:
    """Fine bucket width for ``rows`` rows over ``[lo, hi]`` drawn in ``buckets``, or None.

    None means "downsample in one pass": the rows are few enough to be kept
    unchanged, or too sparse for fine buckets to save anything.
    """
    span = hi - lo
    if rows <= 2 * buckets or span <= 0:
        return None
    width = 2.0 ** math.floor(math.log2(span / buckets / FINE_PER_BUCKET))
    return width if width * rows / span >= MIN_ROWS_PER_FINE else None


@dataclass(frozen=True)
class Summary:
    """Per column and fine bucket (a row per column): earlier and later extreme, sum, count.

    Columns are rows so that reductions over buckets run along contiguous memory
    (``reduceat`` is ~2.5x faster than across the rows of a row-major table).
    """

    columns: tuple[str, ...]
    x: FloatArray  # middle of each fine bucket's first and last time
    early: FloatArray
    late: FloatArray
    sums: FloatArray
    counts: FloatArray

    @property
    def nbytes(self) -> int:
        arrays = (self.x, self.early, self.late, self.sums, self.counts)
        return sum(a.nbytes for a in arrays)


def _runs(idx: npt.NDArray[np.integer]) -> tuple[IntArray, IntArray]:
    """Start offsets and values of the runs of equal ``idx`` (sorted)."""
    starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    return starts, idx[starts].astype(np.intp)


def _extremes(y: FloatArray, starts: IntArray) -> tuple[FloatArray, FloatArray]:
    """Per column (row of ``y``) and run: the earlier and the later of its first min and max."""
    lengths = np.diff(np.r_[starts, y.shape[1]])
    low, high = np.fmin.reduceat(y, starts, axis=1), np.fmax.reduceat(y, starts, axis=1)
    pos = np.arange(y.shape[1], dtype=np.float64)
    at_low = np.minimum.reduceat(
        np.where(y == np.repeat(low, lengths, axis=1), pos, np.inf), starts, axis=1
    )
    at_high = np.minimum.reduceat(
        np.where(y == np.repeat(high, lengths, axis=1), pos, np.inf), starts, axis=1
    )
    low_first = at_low <= at_high
    return np.where(low_first, low, high), np.where(low_first, high, low)


def summarize(x: npt.ArrayLike, columns: Mapping[str, npt.ArrayLike], width: float) -> Summary:
    """The fine buckets of ``width`` seconds of rows at sorted times ``x`` (NaN ignored)."""
    xs = np.asarray(x, dtype=np.float64)
    y = np.empty((len(columns), len(xs)))
    for i, v in enumerate(columns.values()):
        y[i] = v
    if not len(xs):
        return Summary(tuple(columns), xs, y, y, y, y)
    starts, _ = _runs(np.floor(xs / width).astype(np.int64))
    ends = np.r_[starts[1:], len(xs)] - 1
    early, late = _extremes(y, starts)
    missing = np.isnan(y)
    sums = np.add.reduceat(np.where(missing, 0.0, y), starts, axis=1)
    counts = np.add.reduceat((~missing).astype(np.float64), starts, axis=1)
    return Summary(tuple(columns), (xs[starts] + xs[ends]) / 2, early, late, sums, counts)


def _aligned(p: Summary, names: tuple[str, ...]) -> list[FloatArray]:
    """``p``'s early, late, sums and counts for the columns ``names`` (missing: no value)."""
    fields = [p.early, p.late, p.sums, p.counts]
    if p.columns == names:  # the usual case: every segment has the same columns
        return fields
    at = [p.columns.index(c) if c in p.columns else -1 for c in names]
    have = [i for i, j in enumerate(at) if j >= 0]
    out = []
    for k, f in enumerate(fields):
        block = np.full((len(names), len(p.x)), np.nan if k < 2 else 0.0)
        block[have] = f[[at[i] for i in have]]
        out.append(block)
    return out


def combine(parts: Sequence[Summary]) -> Summary:
    """The summaries of the parts of a stream as one, in time order."""
    names = tuple(dict.fromkeys(c for p in parts for c in p.columns))
    blocks = [_aligned(p, names) for p in parts]
    x = np.concatenate([p.x for p in parts]) if parts else np.empty(0)
    fields = [np.concatenate([b[k] for b in blocks], axis=1) if blocks
              else np.empty((len(names), 0)) for k in range(4)]  # fmt: skip
    order = np.argsort(x, kind="stable") if np.any(np.diff(x) < 0) else slice(None)
    return Summary(names, x[order], *(f[:, order] for f in fields))


class Rows:
    """One-pass downsampling of rows at sorted times ``x`` (:mod:`.downsample`)."""

    def __init__(self, x: FloatArray, columns: Mapping[str, FloatArray]) -> None:
        self.x, self.columns, self.rows = x, columns, len(x)
        self.names = list(columns)

    def present(self) -> list[str]:
        """Columns with at least one value."""
        return [c for c, v in self.columns.items() if not np.isnan(v).all()]

    def minmax(
        self, names: Sequence[str], buckets: int
    ) -> tuple[FloatArray, dict[str, FloatArray]]:
        return minmax_frame(self.x, {n: self.columns[n] for n in names}, buckets)

    def mean(self, names: Sequence[str], buckets: int) -> tuple[FloatArray, dict[str, FloatArray]]:
        return mean_frame(self.x, {n: self.columns[n] for n in names}, buckets)

    def totals(self, names: Sequence[str]) -> dict[str, float]:
        return {n: float(np.nansum(self.columns[n])) for n in names}


class Rolled:
    """The same answers as :class:`Rows`, from the summary of ``rows`` rows over ``[lo, hi]``."""

    def __init__(self, summary: Summary, lo: float, hi: float, rows: int) -> None:
        self.summary, self.lo, self.hi, self.rows = summary, lo, hi, rows
        self.names = list(summary.columns)

    def _cols(self, names: Sequence[str]) -> list[int]:
        return [self.summary.columns.index(n) for n in names]

    def _grid(self, buckets: int) -> tuple[IntArray, IntArray, float]:
        """Runs of fine buckets by chart bucket: (starts, chart bucket ids, bucket width)."""
        width = (self.hi - self.lo) / buckets if self.hi > self.lo else 1.0
        idx = np.clip(((self.summary.x - self.lo) / width).astype(np.intp), 0, buckets - 1)
        starts, ids = _runs(idx)
        return starts, ids, width

    def present(self) -> list[str]:
        """Columns with at least one value."""
        return [
            c
            for c, n in zip(self.summary.columns, self.summary.counts.sum(axis=1), strict=True)
            if n > 0
        ]

    def minmax(
        self, names: Sequence[str], buckets: int
    ) -> tuple[FloatArray, dict[str, FloatArray]]:
        """As :func:`.downsample.minmax_frame`: two points per bucket, earlier extreme first."""
        s, cols = self.summary, self._cols(names)
        starts, ids, width = self._grid(buckets)
        both = np.empty((len(cols), 2 * len(s.x)))
        both[:, 0::2], both[:, 1::2] = s.early[cols], s.late[cols]
        early, late = _extremes(both, 2 * starts)
        out = np.full((len(cols), 2 * buckets), np.nan)
        out[:, 2 * ids], out[:, 2 * ids + 1] = early, late
        xs = self.lo + width * (np.repeat(np.arange(buckets), 2) + np.tile([0.25, 0.75], buckets))
        return xs, {n: out[i] for i, n in enumerate(names)}

    def mean(self, names: Sequence[str], buckets: int) -> tuple[FloatArray, dict[str, FloatArray]]:
        """As :func:`.downsample.mean_frame`: bucket centres and means."""
        s, cols = self.summary, self._cols(names)
        starts, ids, width = self._grid(buckets)
        sums = np.add.reduceat(s.sums[cols], starts, axis=1)
        counts = np.add.reduceat(s.counts[cols], starts, axis=1)
        out = np.full((len(cols), buckets), np.nan)
        out[:, ids] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        centres = np.asarray(self.lo + width * (np.arange(buckets) + 0.5), dtype=np.float64)
        return centres, {n: out[i] for i, n in enumerate(names)}

    def totals(self, names: Sequence[str]) -> dict[str, float]:
        sums = self.summary.sums[self._cols(names)].sum(axis=1)
        return {n: float(v) for n, v in zip(names, sums, strict=True)}
