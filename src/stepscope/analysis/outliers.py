"""Step outliers: the one definition that StepOutlier, the report and the dashboard share.

A step is an outlier when its duration differs from the **baseline** of its
neighbours by more than ``stddev`` **robust standard deviations** and by more
than ``min_excess_s`` seconds:

* its neighbours are the steps of the same rank and phase around it, in blocks
  of ``window // 5`` steps aligned by step number (step ``s`` is in block
  ``s // (window // 5)``), so a step has the same neighbours live and offline;
* the baseline is the median of five block medians: its own block's and two
  blocks' on each side (about ``window`` steps). A median of medians ignores a
  stall every few steps and a run of slow steps up to about ``0.4 * window``
  long, and follows a job whose steps slow down or speed up;
* the robust standard deviation is 1.4826 (the MAD of a normal distribution)
  times the same median of medians of the absolute residuals ``|duration -
  baseline|``, never less than 2% of the baseline: jitter on very regular steps
  is not an outlier. Noise on a busy host widens it where the noise is.

A mean and standard deviation are not used: a few slow steps from a noisy host
inflate the standard deviation until real stalls hide under it. Since more
than half of a neighbourhood's residuals are below its median absolute residual,
most steps cannot be outliers; when more than half of a rank's steps would be,
that rank has no typical step and none is flagged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from stepscope.analysis.downsample import FloatArray, IntArray
from stepscope.jobfolder import RuleVerdict

BoolArray = npt.NDArray[np.bool_]

MAD_TO_STD = 1.4826  # the standard deviation of normal data is 1.4826 times its MAD
# The 90th percentile of |normal noise| is 1.645 standard deviations; a heavy tail of
# noise (a busy host's preempted steps) raises it above the MAD's estimate.
TAIL, TAIL_TO_STD = 0.9, 1.645
FLOOR_SHARE = 0.02  # the robust standard deviation is at least 2% of the baseline
SIDE_BLOCKS = 2  # blocks on each side of a step's own block
RULE = "StepOutlier"
MIN_STEPS = 3  # fewer judged steps of a rank and phase: none is an outlier


class Judged(NamedTuple):
    """Per step: the neighbours' baseline, the robust standard deviation, the excess
    (duration - baseline, negative for a fast step), the limit a slow step must
    exceed, and whether the step is an outlier."""

    baseline: FloatArray
    sigma: FloatArray
    excess: FloatArray
    limit: FloatArray
    outlier: BoolArray


def _block_quantiles(values: FloatArray, first: IntArray, counts: IntArray, q: float) -> FloatArray:
    """The ``q`` quantile of each block (rows ``first[i]`` to ``first[i] + counts[i]``).

    The blocks are laid out as the rows of a NaN-padded table and sorted row by
    row: a tenth of the time of one sort by (block, value) over all values.
    """
    block = np.repeat(np.arange(len(first)), counts)
    table = np.full((len(first), int(counts.max())), np.nan)
    table[block, np.arange(len(values)) - first[block]] = values
    table.sort(axis=1)  # NaN last
    rows, pos = np.arange(len(first)), q * (counts - 1)
    lo, frac = np.floor(pos).astype(np.int64), pos - np.floor(pos)
    hi = np.minimum(lo + 1, counts - 1)
    out: FloatArray = table[rows, lo] * (1 - frac) + table[rows, hi] * frac
    return out


def _around(medians: FloatArray, series: IntArray) -> FloatArray:
    """The median over each block and its ``SIDE_BLOCKS`` neighbours of the same series."""
    n, k = len(medians), SIDE_BLOCKS
    pad_m, pad_s = np.full(k, np.nan), np.full(k, -1)
    m, s = np.r_[pad_m, medians, pad_m], np.r_[pad_s, series, pad_s]
    shifted = [np.where(s[i : i + n] == series, m[i : i + n], np.nan) for i in range(2 * k + 1)]
    out: FloatArray = np.nanmedian(np.stack(shifted), axis=0)
    return out


def judge(
    durations: npt.ArrayLike,
    steps: npt.ArrayLike,
    series: npt.ArrayLike | None = None,
    *,
    stddev: float = 5.0,
    min_excess_s: float = 0.1,
    window: int = 100,
) -> Judged:
    """Judge each step against its neighbours (the module's definition).

    ``durations`` (seconds) and ``steps`` (step numbers) are ordered by series,
    then step; ``series`` numbers the series (one per rank and phase; one
    series when omitted). Vectorised over every series at once.
    """
    d = np.asarray(durations, dtype=np.float64)
    step = np.asarray(steps, dtype=np.int64)
    ser = np.zeros(len(d), np.int64) if series is None else np.asarray(series, np.int64)
    if not len(d):
        empty = np.empty(0)
        return Judged(empty, empty, empty, empty, np.zeros(0, dtype=bool))
    b = step // max(1, int(window) // (2 * SIDE_BLOCKS + 1))
    blocks = np.r_[True, (ser[1:] != ser[:-1]) | (b[1:] != b[:-1])]
    first = np.flatnonzero(blocks)
    counts = np.diff(np.r_[first, len(d)])
    # A day-long job judges 10^5-10^6 steps at once (8 MB an array): temporaries are
    # dropped as soon as they are used, and sigma is built in place.
    del step, b, blocks

    def around(values: FloatArray, q: float) -> FloatArray:
        medians = _around(_block_quantiles(values, first, counts, q), ser[first])
        return np.repeat(medians, counts)

    baseline = around(d, 0.5)
    excess = d - baseline
    sigma = MAD_TO_STD * around(np.abs(excess), 0.5)
    np.maximum(sigma, around(np.abs(excess), TAIL) / TAIL_TO_STD, out=sigma)
    np.maximum(sigma, FLOOR_SHARE * np.abs(baseline), out=sigma)
    margin = np.maximum(stddev * sigma, min_excess_s)
    outlier = np.abs(excess) > margin
    outlier &= _typical(ser, outlier)
    return Judged(baseline, sigma, excess, baseline + margin, outlier)


def _typical(series: IntArray, outlier: BoolArray) -> BoolArray:
    """Per step, whether its series can have outliers: enough steps, at most half flagged."""
    n = np.bincount(series)
    flagged = np.bincount(series, weights=outlier)
    ok = (n >= MIN_STEPS) & (2 * flagged <= n)
    return ok[series]


@dataclass(frozen=True)
class Definition:
    """The parameters of the definition, as StepOutlier's (its defaults)."""

    stddev: float = 5.0
    min_excess_s: float = 0.1
    window: int = 100
    skip_steps: int = 10

    @classmethod
    def of_job(cls, verdicts: Iterable[RuleVerdict]) -> Definition:
        """The parameters the job's StepOutlier verdict records, else the defaults: the
        report marks the steps the rule judged."""
        params = next((v.get("parameters") for v in verdicts if v.get("rule") == RULE), None)
        if not isinstance(params, dict):
            return cls()
        default = cls()

        def num(name: str) -> float:
            value = params.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
            return float(getattr(default, name))

        window, skip = int(num("window")), int(num("skip_steps"))
        return cls(num("stddev"), num("min_excess_s"), window, skip)


def judge_steps(
    steps: pd.DataFrame,
    definition: Definition | None = None,
    columns: Iterable[str] | None = None,
) -> pd.DataFrame:
    """The steps that are judged, with the columns of :class:`Judged` added.

    Judged are the steps from ``skip_steps`` on that were not profiled (a
    profiler slows the steps it records), each against the others of its rank
    and phase. Rows are ordered by rank, phase and step. ``columns``: the columns
    of ``steps`` to keep (all by default): a long job's judged copy is then only
    what the caller reads.
    """
    p = definition or Definition()
    keep = steps["step"].to_numpy() >= p.skip_steps
    if "profiled" in steps:
        keep &= ~steps["profiled"].fillna(False).to_numpy(dtype=bool)
    keep &= steps["duration"].notna().to_numpy() & steps["phase"].notna().to_numpy()
    rows = _ordered_rows(steps, keep, columns)
    series = rows.groupby(["rank", "phase"], sort=False).ngroup().to_numpy()
    found = judge(
        rows["duration"].to_numpy(np.float64),
        rows["step"].to_numpy(),
        series,
        stddev=float(p.stddev),
        min_excess_s=float(p.min_excess_s),
        window=int(p.window),
    )
    for name, values in found._asdict().items():
        rows[name] = values  # a fresh frame: no copy of the others (copy-on-write)
    return rows


def _ordered_rows(
    steps: pd.DataFrame, keep: np.ndarray, columns: Iterable[str] | None
) -> pd.DataFrame:
    """The kept rows (and columns) of ``steps`` ordered by rank, phase and step, in one
    copy: the job's steps are read in that order, so most often no sort is needed."""
    names = ["rank", "phase", "step", "duration"]
    wanted = list(steps.columns) if columns is None else list(dict.fromkeys([*names, *columns]))
    index = np.flatnonzero(keep)
    key = steps[["rank", "phase", "step"]].iloc[index].reset_index(drop=True)
    order = key.sort_values(["rank", "phase", "step"], kind="stable").index.to_numpy()
    return steps[wanted].iloc[index[order]]


def cost_by_rank(judged: pd.DataFrame) -> dict[int, float]:
    """Seconds each rank lost to its slow outliers: the sum of their excess."""
    slow = judged[judged["outlier"].to_numpy() & (judged["excess"].to_numpy() > 0)]
    return {int(r): float(s) for r, s in slow.groupby("rank")["excess"].sum().items()}
