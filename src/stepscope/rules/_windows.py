"""Windows shared by the rules: patience, aligned tumbling windows, runs of hits.

Windows are aligned to the job's start (``RuleInput.start()``): window ``k`` of
width ``w`` is ``[origin + k*w, origin + (k+1)*w)``, half-open, so a sample on
an edge belongs to exactly one window, and a window means the same span in a
live scan and in the final evaluation. A problem that starts late is judged in
its own windows, never diluted by hours of healthy data before it.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from ._input import RuleInput

GPU_UTIL = re.compile(r"^gpu(\d+)_util$")


def severity(value: float, threshold: float, worst: float) -> float:
    """0.3 at the threshold, rising linearly to 1.0 at ``worst`` (either direction)."""
    span = worst - threshold
    if span == 0:
        return 1.0
    return float(0.3 + 0.7 * min(1.0, max(0.0, (value - threshold) / span)))


def gpu_indices(system: pd.DataFrame) -> list[int]:
    """The GPUs (``gpu<i>_util`` columns) with at least one value."""
    found = []
    for col in system.columns:
        m = GPU_UTIL.match(str(col))
        if m and system[col].notna().any():
            found.append(int(m.group(1)))
    return sorted(found)


def no_gpu_reason(data: RuleInput) -> str:
    nodes = ", ".join(data.node_names()) or "this job"
    return f"no GPU metrics on {nodes} (CPU-only): this rule judges GPUs"


def after_patience(data: RuleInput, frame: pd.DataFrame, patience: int) -> pd.DataFrame:
    """The samples after the first ``patience`` sampling intervals of the job."""
    if not len(frame):
        return frame
    node = str(frame["node"].iloc[0]) if "node" in frame else None
    begin = data.start() + patience * data.interval_s(node)
    return frame[frame["time"] >= begin]


def patience_reason(patience: int, total: int) -> str:
    return (
        f"not enough data yet: all {total} samples fall in the patience of {patience} "
        "samples at the start of the job"
    )


def window_width(data: RuleInput, node: str | None, window: int) -> float:
    """The duration of ``window`` samples on ``node``, seconds."""
    return window * data.interval_s(node)


def window_index(times: pd.Series | np.ndarray, origin: float, width: float) -> np.ndarray:
    """The aligned window of each time: ``floor((t - origin) / width)``."""
    return np.floor((np.asarray(times, dtype=np.float64) - origin) / width).astype(np.int64)


def with_windows(data: RuleInput, frame: pd.DataFrame, window: int) -> pd.DataFrame:
    """``frame`` with a ``win`` column: its aligned window of ``window`` samples."""
    node = str(frame["node"].iloc[0]) if len(frame) and "node" in frame else None
    width = window_width(data, node, window)
    return frame.assign(win=window_index(frame["time"], data.start(), width))


def window_spans(frame: pd.DataFrame) -> pd.DataFrame:
    """Per window: first and last sample time and sample count."""
    return frame.groupby("win")["time"].agg(start="min", end="max", n="count")


@dataclass(frozen=True)
class Hit:
    """The condition of a rule held for ``key`` (a device, a pair) in window ``win``."""

    key: str
    win: int
    start: float
    end: float
    value: float


def runs(hits: Iterable[Hit]) -> list[list[Hit]]:
    """Hits grouped into runs of consecutive windows of one key (one finding each)."""
    out: list[list[Hit]] = []
    last: dict[str, list[Hit]] = {}
    for hit in sorted(hits, key=lambda h: (h.key, h.win)):
        run = last.get(hit.key)
        if run is not None and hit.win == run[-1].win + 1:
            run.append(hit)
            continue
        run = [hit]
        last[hit.key] = run
        out.append(run)
    return out


def worst_of(run: list[Hit], higher_is_worse: bool = True) -> float:
    values = [h.value for h in run]
    return max(values) if higher_is_worse else min(values)


def hits_from(
    table: pd.DataFrame,
    spans: pd.DataFrame,
    key: str,
    fired: Callable[[pd.DataFrame], pd.Series],
) -> list[Hit]:
    """Hits of ``key`` for the windows (rows of ``table``, by ``win``) where ``fired``.

    ``fired`` takes the whole table and returns a boolean Series (vectorized).
    """
    chosen = table[fired(table).fillna(False).astype(bool)]
    if not len(chosen):
        return []
    span = spans.reindex(chosen.index)
    rows = zip(chosen.index, span["start"], span["end"], chosen["value"], strict=True)
    return [Hit(key, int(cast(int, w)), float(a), float(b), float(v)) for w, a, b, v in rows]


class Windows:
    """The aligned windows of one node's samples (``framed``, with a ``win`` column),
    reduced with numpy: far cheaper than a pandas groupby per column and GPU, which
    matters for the live runner's scans over many nodes. NaN values are skipped."""

    def __init__(self, framed: pd.DataFrame) -> None:
        win = framed["win"].to_numpy(np.int64)
        self.order = np.argsort(win, kind="stable") if (np.diff(win) < 0).any() else None
        win = win if self.order is None else win[self.order]
        self.offsets = np.concatenate([[0], np.flatnonzero(np.diff(win)) + 1]).astype(np.int64)
        self.ids = win[self.offsets]
        self.counts = np.diff(np.append(self.offsets, len(win)))
        t = self.columns(framed, ["time"])[:, 0]
        self.spans = pd.DataFrame(
            {
                "start": np.fmin.reduceat(t, self.offsets),
                "end": np.fmax.reduceat(t, self.offsets),
                "n": self.counts,
            },
            index=pd.Index(self.ids, name="win"),
        )

    def columns(self, framed: pd.DataFrame, names: list[str]) -> np.ndarray:
        """``framed[names]`` as float64 rows in window order (2-D)."""
        x = framed[names].to_numpy(np.float64)
        return x if self.order is None else x[self.order]

    def mean(self, x: np.ndarray) -> np.ndarray:
        """Per window (rows) and column: the mean of the non-NaN values (NaN if none)."""
        ok = ~np.isnan(x)
        total = np.add.reduceat(np.where(ok, x, 0.0), self.offsets, axis=0)
        n = np.add.reduceat(ok.astype(np.float64), self.offsets, axis=0)
        return np.divide(total, n, out=np.full_like(total, np.nan), where=n > 0)

    def share(self, mask: np.ndarray) -> np.ndarray:
        """Per window: the share of samples where ``mask`` holds, % (0-100)."""
        hits = np.add.reduceat(mask.astype(np.float64), self.offsets, axis=0)
        counts = self.counts if mask.ndim == 1 else self.counts[:, None]
        return np.asarray(hits / counts * 100.0)

    def quantiles(self, x: np.ndarray, qs: list[float]) -> np.ndarray:
        """Per window: quantiles ``qs`` (0-1, linear) of each column: (windows, qs, cols)."""
        ends = np.append(self.offsets[1:], len(x))
        with warnings.catch_warnings():  # an all-NaN column gives NaN, as pandas does
            warnings.simplefilter("ignore", RuntimeWarning)
            parts = [
                np.nanpercentile(x[a:b], np.asarray(qs) * 100.0, axis=0)
                for a, b in zip(self.offsets, ends, strict=True)
            ]
        return np.stack(parts)

    def table(self, value: np.ndarray) -> pd.DataFrame:
        """A ``value`` per window, indexed by window (for :func:`hits_from`)."""
        return pd.DataFrame({"value": value}, index=pd.Index(self.ids, name="win"))
