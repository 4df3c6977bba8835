"""Numpy reductions per aligned window, shared by the rules.

A live scan judges every node's recent buffer with a dozen rules; pandas'
per-call overhead (a groupby per column, a DataFrame per GPU and window)
dominated it. These reductions give the same numbers as the pandas code they
replace (tested), at a fraction of the cost.
"""

from __future__ import annotations

import warnings

import numpy as np
import numpy.typing as npt
import pandas as pd

from stepscope.analysis.downsample import FloatArray
from stepscope.rules._windows import Hit


class Windows:
    """The aligned windows of one node's samples (``framed``, with a ``win`` column),
    reduced with numpy. NaN values are skipped."""

    def __init__(self, framed: pd.DataFrame) -> None:
        win = framed["win"].to_numpy(np.int64)
        self.order = np.argsort(win, kind="stable") if (np.diff(win) < 0).any() else None
        win = win if self.order is None else win[self.order]
        self.offsets = np.concatenate([[0], np.flatnonzero(np.diff(win)) + 1]).astype(np.int64)
        self.ids = win[self.offsets]
        self.counts = np.diff(np.append(self.offsets, len(win)))
        # Columns as float64 in window order, converted once for all the rules.
        self._framed = framed
        self._converted: dict[str, npt.NDArray[np.float64]] = {}
        t = self.columns(framed, ["time"])[:, 0]
        self.start = np.fmin.reduceat(t, self.offsets)
        self.end = np.fmax.reduceat(t, self.offsets)

    def columns(self, framed: pd.DataFrame, names: list[str]) -> npt.NDArray[np.float64]:
        """``framed[names]`` as float64 rows in window order (2-D)."""
        if framed is not self._framed:
            x: npt.NDArray[np.float64] = framed[names].to_numpy(np.float64)
            return x if self.order is None else x[self.order]
        for name in names:
            if name not in self._converted:
                x = framed[name].to_numpy(np.float64)
                self._converted[name] = x if self.order is None else x[self.order]
        return np.column_stack([self._converted[n] for n in names])

    def has_values(self, framed: pd.DataFrame, name: str) -> bool:
        """Whether column ``name`` of ``framed`` exists and has a non-NaN value."""
        return name in framed and bool((~np.isnan(self.columns(framed, [name]))).any())

    def mean(self, x: FloatArray) -> FloatArray:
        """Per window (rows) and column: the mean of the non-NaN values (NaN if none)."""
        ok = ~np.isnan(x)
        total = np.add.reduceat(np.where(ok, x, 0.0), self.offsets, axis=0)
        n = np.add.reduceat(ok.astype(np.float64), self.offsets, axis=0)
        return np.divide(total, n, out=np.full_like(total, np.nan), where=n > 0)

    def share(self, mask: npt.NDArray[np.bool_]) -> FloatArray:
        """Per window: the share of samples where ``mask`` holds, % (0-100)."""
        hits = np.add.reduceat(mask.astype(np.float64), self.offsets, axis=0)
        counts = self.counts if mask.ndim == 1 else self.counts[:, None]
        return np.asarray(hits / counts * 100.0)

    def quantiles(self, x: FloatArray, qs: list[float]) -> FloatArray:
        """Per window: quantiles ``qs`` (0-1, linear) of each column: (windows, qs, cols)."""
        ends = np.append(self.offsets[1:], len(x))
        pct = np.asarray(qs) * 100.0
        parts = []
        for a, b in zip(self.offsets, ends, strict=True):
            block = x[a:b]
            if not np.isnan(block).any():  # the same numbers, without a call per column
                parts.append(np.percentile(block, pct, axis=0))
                continue
            with warnings.catch_warnings():  # an all-NaN column gives NaN, as pandas does
                warnings.simplefilter("ignore", RuntimeWarning)
                parts.append(np.nanpercentile(block, pct, axis=0))
        return np.stack(parts)

    def hits(self, key: str, value: FloatArray, fired: npt.NDArray[np.bool_]) -> list[Hit]:
        """A :class:`Hit` of ``key`` for each window where ``fired`` (per window) holds."""
        return [
            Hit(key, int(self.ids[i]), float(self.start[i]), float(self.end[i]), float(value[i]))
            for i in np.flatnonzero(fired)
        ]


def peer_medians(x: npt.NDArray[np.floating]) -> npt.NDArray[np.floating]:
    """Per row and column of ``x``: the median of the row's other non-NaN values (NaN
    if none), as ``DataFrame.drop(columns=c).median(axis=1)`` for every column ``c``
    at once: sorted once per row, each median read at its shifted middle positions.
    Computed in float64, returned in the dtype of ``x`` if a float one, as pandas does."""
    rows, cols = x.shape
    kind, x = x.dtype, x.astype(np.float64)
    order = np.argsort(x, axis=1, kind="stable")  # NaN sort last
    ranked = np.take_along_axis(x, order, axis=1)
    pos = np.empty_like(order)
    np.put_along_axis(pos, order, np.arange(cols)[None, :].repeat(rows, axis=0), axis=1)
    valid = ~np.isnan(x)
    n = valid.sum(axis=1, keepdims=True)
    m = np.where(valid, n - 1, n)  # a NaN value is not among its peers' values
    lo, hi = (m - 1) // 2, m // 2
    lo = np.where(valid & (lo >= pos), lo + 1, lo)  # skip the value itself
    hi = np.where(valid & (hi >= pos), hi + 1, hi)
    a = np.take_along_axis(ranked, np.clip(lo, 0, cols - 1), axis=1)
    b = np.take_along_axis(ranked, np.clip(hi, 0, cols - 1), axis=1)
    out = np.where(m > 0, (a + b) / 2.0, np.nan)
    return out.astype(kind) if kind.kind == "f" else out


class Groups:
    """Rows grouped by integer keys, in the order of ``DataFrame.groupby(keys)``
    (sorted, the first key first), reduced with numpy."""

    def __init__(self, *keys: npt.NDArray[np.integer]) -> None:
        self.order = np.lexsort(keys[::-1])  # lexsort's primary key is its last
        ranked = [k[self.order] for k in keys]
        change = np.zeros(len(self.order), dtype=bool)
        change[:1] = True
        for k in ranked:
            change[1:] |= k[1:] != k[:-1]
        self.offsets = np.flatnonzero(change)
        self.keys = [k[self.offsets] for k in ranked]
        self.counts = np.diff(np.append(self.offsets, len(self.order)))

    def first(self, x: npt.NDArray[np.generic] | pd.Series) -> npt.NDArray[np.generic]:
        """Per group: the value of its first row (in the original order). A Series is
        read at those rows only (a string column is not turned into objects whole)."""
        rows = self.order[self.offsets]
        if isinstance(x, pd.Series):
            return np.asarray(x.iloc[rows].to_numpy())
        return np.asarray(x)[rows]

    def min(self, x: FloatArray) -> FloatArray:
        return np.asarray(np.fmin.reduceat(np.asarray(x)[self.order], self.offsets))

    def max(self, x: FloatArray) -> FloatArray:
        return np.asarray(np.fmax.reduceat(np.asarray(x)[self.order], self.offsets))

    def median(self, x: npt.NDArray[np.floating]) -> npt.NDArray[np.floating]:
        """Per group: the median of the non-NaN values (NaN if none), computed in float64
        and returned in the dtype of ``x`` if a float one, as pandas does."""
        x = np.asarray(x)
        group = np.repeat(np.arange(len(self.offsets)), self.counts)
        values = x.astype(np.float64)[self.order]
        ranked = values[np.lexsort((values, group))]  # NaN sort last within a group
        n = np.add.reduceat(~np.isnan(ranked), self.offsets)
        lo = self.offsets + np.maximum(n - 1, 0) // 2
        hi = self.offsets + np.maximum(n, 1) // 2 - (n == 0)
        out = np.where(n > 0, (ranked[lo] + ranked[hi]) / 2.0, np.nan)
        return out.astype(x.dtype) if x.dtype.kind == "f" else out
