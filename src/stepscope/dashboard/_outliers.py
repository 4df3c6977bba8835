"""Outlier marks of the step duration chart, as the report draws them.

The marks come from :func:`stepscope.analysis.outliers.judge_steps` (StepOutlier's
definition, with the job's parameters), judged over all of a rank's steps of a
phase, so that a window of the job shows the marks the whole job has. They are
then laid on the points the chart's reducer keeps: the rows themselves for a
short window, else the reducer's grid of two points per bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from stepscope.analysis.downsample import FloatArray, bucket_index
from stepscope.analysis.outliers import Definition, judge_steps
from stepscope.analysis.pagescale import StepScale, step_scale
from stepscope.analysis.profiled import Spans, cap_profiled
from stepscope.dashboard._reduce import Cut
from stepscope.dashboard._streams import Part

#: The series' labels and colours: the report's (report/_steps.py).
LIMIT = "outlier limit"
OUTLIERS = "outliers"
LIMIT_COLOR, OUTLIER_COLOR = "#999999", "#d62728"


def _frame(parts: Sequence[Part], rank: int, phase: str) -> pd.DataFrame:
    """The steps of ``parts`` (one rank, one phase) as the columns judge_steps reads."""
    frames = []
    for p in parts:
        if not len(p) or "step" not in p.names or "duration" not in p.names:
            continue
        cols = {"start": p.x, "step": p.column("step"), "duration": p.column("duration")}
        if "profiled" in p.names:
            cols["profiled"] = p.column("profiled")
        frames.append(pd.DataFrame(cols))
    if not frames:
        return pd.DataFrame({"start": [], "step": [], "duration": []})
    return pd.concat(frames, ignore_index=True).assign(rank=rank, phase=phase)


Marks = tuple[FloatArray, dict[str, FloatArray]]


def warmup(parts: Sequence[Part], rank: int, phase: str) -> StepScale:
    """The y-range top that leaves the rank's warm-up steps of ``phase`` above the step
    chart, judged over all of them (a window of the job shows the job's scale)."""
    steps = _frame(parts, rank, phase).sort_values("start")
    return step_scale(steps["start"], steps["duration"], steps["step"])


def marks(
    parts: Sequence[Part],
    cuts: Sequence[Cut],
    rank: int,
    phase: str,
    definition: Definition,
    spans: Spans | None = None,
) -> Marks | None:
    """The start times of the rows of ``cuts`` and, per row, the outlier limit and the
    duration where the step is an outlier (else NaN). None: no step to judge.

    ``spans``: the rank's profiling windows; a ``profiled`` flag stands only on the
    steps they could have slowed (:mod:`stepscope.analysis.profiled`)."""
    x = np.concatenate([c.x for c in cuts]) if cuts else np.empty(0)
    steps = _frame(parts, rank, phase)
    if steps.empty or not len(x):
        return None
    if spans is not None:
        steps = cap_profiled(steps, spans)
    judged = judge_steps(steps, definition).drop_duplicates("start").set_index("start")
    found = judged.reindex(x)
    outlier = found["outlier"].fillna(False).to_numpy(dtype=bool)
    return x, {
        LIMIT: found["limit"].to_numpy(np.float64),
        OUTLIERS: np.where(outlier, found["duration"].to_numpy(np.float64), np.nan),
    }


def on_points(
    xs: FloatArray, x: FloatArray, cols: dict[str, FloatArray], buckets: int
) -> dict[str, FloatArray]:
    """``cols`` (one value per row at ``x``) on the chart's points ``xs``.

    The reducer keeps the rows of a short window as they are; a long one becomes
    two points per bucket over ``[x[0], x[-1]]`` (earlier, later): a bucket's
    lowest value goes on the earlier point and its highest on the later one, so a
    slow outlier keeps its exact duration.
    """
    if len(xs) == len(x) and np.allclose(xs, x):
        return cols
    idx, _, _ = bucket_index(x, buckets)
    out: dict[str, FloatArray] = {}
    for name, v in cols.items():
        grid = np.full(2 * buckets, np.nan)
        keep = ~np.isnan(v)
        np.fmin.at(grid, 2 * idx[keep], v[keep])
        np.fmax.at(grid, 2 * idx[keep] + 1, v[keep])
        if name == OUTLIERS:  # a dot per outlier: not twice the one outlier of a bucket
            early = grid[0::2]
            early[early == grid[1::2]] = np.nan
        out[name] = grid
    return out
