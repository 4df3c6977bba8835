"""The rows of a stream's parts in a time window, as a reducer for the charts.

A window with few rows is downsampled in one pass (:class:`~stepscope.analysis.rollup.Rows`).
A long one (a whole day) is downsampled from per-part summaries
(:mod:`stepscope.analysis.rollup`): a part wholly inside the window has its
summary cached by the part's key (segment path, size, mtime), the resolution and
the columns, so a running job's refresh summarizes only its rewritten last
segment and the window's edges, and joins it to the combination of the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope.analysis.downsample import FloatArray
from stepscope.analysis.rollup import Rolled, Rows, Summary, combine, fine_width, summarize
from stepscope.dashboard._cache import Sized
from stepscope.dashboard._streams import Part

Reducer = Rows | Rolled


@dataclass(frozen=True)
class Cut:
    """Rows ``lo:hi`` of a part."""

    part: Part
    lo: int
    hi: int

    @property
    def whole(self) -> bool:
        return self.lo == 0 and self.hi == len(self.part)

    @property
    def x(self) -> FloatArray:
        return self.part.x[self.lo : self.hi]

    def column(self, name: str) -> npt.NDArray[np.generic]:
        return self.part.column(name)[self.lo : self.hi]


def cut(parts: Iterable[Part], start: float | None, end: float | None) -> list[Cut]:
    """The non-empty cuts of ``parts`` with ``start <= x < end`` (None: unbounded)."""
    out = []
    for p in parts:  # most parts of a day lie wholly before, after or inside a window
        if (start is not None and p.last < start) or (end is not None and p.first >= end):
            continue
        lo = 0 if start is None or p.first >= start else int(np.searchsorted(p.x, start, "left"))
        hi = len(p) if end is None or p.last < end else int(np.searchsorted(p.x, end, "left"))
        if hi > lo:
            out.append(Cut(p, lo, hi))
    return out


def last_value(cuts: Sequence[Cut], name: str) -> float | None:
    """Column ``name`` in the window's latest row (None for an empty window)."""
    if not cuts:
        return None
    latest = max(cuts, key=lambda c: c.part.x[c.hi - 1])
    return float(latest.part.column(name)[latest.hi - 1])


def columns(parts: Iterable[Part]) -> list[str]:
    """Every column name of the parts, in order of first appearance."""
    return list(dict.fromkeys(n for names in dict.fromkeys(p.names for p in parts) for n in names))


def reducer(cuts: Sequence[Cut], names: Sequence[str], buckets: int, cache: Sized) -> Reducer:
    """The columns ``names`` of the rows of ``cuts``, ready to be drawn in ``buckets``."""
    rows = sum(c.hi - c.lo for c in cuts)
    if not rows:
        return Rows(np.empty(0), {n: np.empty(0) for n in names})
    lo = min(float(c.x[0]) for c in cuts)
    hi = max(float(c.x[-1]) for c in cuts)
    width = fine_width(lo, hi, buckets, rows)
    if width is None or any(c.part.key is None for c in cuts):
        return _rows(cuts, names)
    head, tail = _head(cuts[:-1], names, width, cache), _summary(cuts[-1], names, width, cache)
    return Rolled(combine([*head, tail]), lo, hi, rows)


def _head(cuts: Sequence[Cut], names: Sequence[str], width: float, cache: Sized) -> list[Summary]:
    """The summaries of all parts but the last, combined once for as long as they last.

    A running job's writer rewrites only its last segment, so its other parts,
    and their combination, stay the same from one flush to the next.
    """
    if len(cuts) < 2 or not all(c.whole for c in cuts):
        return [_summary(c, names, width, cache) for c in cuts]
    key = ("head", tuple(c.part.key for c in cuts), width, tuple(names))
    return [cache.get(key, lambda: combine([_summary(c, names, width, cache) for c in cuts]))]


def _summary(c: Cut, names: Sequence[str], width: float, cache: Sized) -> Summary:
    def compute() -> Summary:
        return summarize(c.x, {n: c.column(n) for n in names}, width)

    if not c.whole:  # a window's edge: cut anew for each window
        return compute()
    return cache.get((c.part.key, width, tuple(names)), compute)


def _rows(cuts: Sequence[Cut], names: Sequence[str]) -> Rows:
    x = np.concatenate([c.x for c in cuts])
    cols = {n: np.concatenate([c.column(n) for c in cuts]) for n in names}
    if np.any(np.diff(x) < 0):  # parts that overlap in time (two writers)
        order = np.argsort(x, kind="stable")
        x, cols = x[order], {n: v[order] for n, v in cols.items()}
    return Rows(x, cols)
