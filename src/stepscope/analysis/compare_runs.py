"""The statistics of ``stepscope compare`` with several runs a side: the spread between runs.

On a shared host identical runs differ by 10-30% in their median step (BENCHMARKS.md,
"compare") while each run's own steps are steady, so an interval from the steps of one
run a side (:mod:`.compare_stats`) cannot see that noise. With two runs or more on a
side (one or more on the other), each run is reduced to one number per column: the
**median** of its steady steps (robust to its stalls), and the two sides' run medians
are compared with Student's **t** interval, the spread pooled over both sides (the
spread between runs is the host's and the script's, shared by both sides; pooling
gives 2 runs a side 2 degrees of freedom where Welch's could fall to 1; one run
against K is judged against the K runs' spread, with K - 1):

* the step time on the log scale (a ratio B/A: the difference of the mean log run
  medians, its interval exponentiated);
* each part in seconds (a part can be ~0, where a log is meaningless).

Why not a two-level bootstrap (runs, then steps within each run)? With 2 or 3 runs a
side it has only 3 or 10 distinct mixes of runs, and its percentile interval is too
narrow: with 2 runs a side and runs much noisier than steps, the extreme mix (the
slowest B run over the fastest A run) holds 1/16 of the resamples, past 2.5%, so two
identical sides whose runs merely do not interleave (1 time in 3) would be called
different. The t interval on run medians is the small-sample answer for few clusters
(each run's median carries its own steps' noise, so nothing is lost), and it widens,
as it should, when the runs are few.

The parts are a family of tests: a part's change is **beyond its noise** when its
Bonferroni interval (level ``1 - 5%/m`` for the ``m`` parts compared) excludes 0 and
the change is at least :data:`MIN_PART_SHARE` of A's step (module
:mod:`.compare_verdict` says what the verdict does with it).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from stepscope.analysis.compare_stats import Interval, _nanmedian
from stepscope.analysis.downsample import FloatArray

ALPHA = 0.05  # the verdict's and the gate's error rate: 95% intervals
MIN_PART_SHARE = 0.02  # a part's change below 2% of A's step is not called: too small to matter


@dataclass(frozen=True)
class RunSpread:
    """Each run's median step (seconds, in the order the runs were given) and the
    spread between runs: the pooled standard deviation of the log run medians as %
    (about the coefficient of variation of a run's median) with its degrees of
    freedom; ``spread_pct`` is None when each side has one run (unknown)."""

    base_medians: list[float]
    new_medians: list[float]
    spread_pct: float | None
    df: int

    @property
    def known(self) -> bool:
        return self.spread_pct is not None


@dataclass(frozen=True)
class RunStats:
    """The between-run comparison of one phase: the step time's ratio, each part's
    difference (95% and family-wise intervals) and each side's value per column."""

    ratio: Interval
    changes: list[Interval]  # per part (column 1...), 95%
    family: list[Interval]  # per part, level 1 - ALPHA / m
    base: FloatArray  # column 0: geometric mean of run medians; parts: mean
    new: FloatArray
    spread: RunSpread


def t_quantile(level: float, df: int) -> float:
    """The two-sided Student t quantile: P(|T| < q) = ``level`` for ``df`` degrees of
    freedom (Abramowitz and Stegun 26.7.3-4, solved by bisection; no scipy here)."""
    lo, hi = 0.0, math.pi / 2
    for _ in range(80):
        mid = (lo + hi) / 2
        if _t_within(mid, df) < level:
            lo = mid
        else:
            hi = mid
    return math.sqrt(df) * math.tan((lo + hi) / 2)


def _t_within(theta: float, df: int) -> float:
    """P(|T| < sqrt(df) tan(theta)) for an integer ``df`` >= 1."""
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2:
        term, total = math.cos(theta), 0.0
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return 2 / math.pi * (theta + s * total)
    term, total = 1.0, 0.0
    for k in range(1, df // 2 + 1):
        total += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return s * total


def spread_known(n_a: int, n_b: int) -> bool:
    """Whether runs of ``n_a`` and ``n_b`` show the spread between runs: a run a side or
    more, and two or more on one side (K runs against 1: the new run is judged against
    the spread of the baseline's runs, taken to hold for it, as a new run of the same
    host and script; the t interval then has ``K - 1`` degrees of freedom)."""
    return min(n_a, n_b) >= 1 and n_a + n_b >= 3


def pooled(a: FloatArray, b: FloatArray, level: float) -> Interval:
    """mean(b) - mean(a) with its pooled-variance t interval at ``level``; NaN values
    (a run without the part) left out; NaN bounds when no spread is known
    (:func:`spread_known`)."""
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if not spread_known(len(a), len(b)):
        value = float(b.mean() - a.mean()) if len(a) and len(b) else math.nan
        return Interval(value, math.nan, math.nan, level)
    df = len(a) + len(b) - 2
    ss = float(((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum())
    se = math.sqrt(ss / df * (1 / len(a) + 1 / len(b)))
    value = float(b.mean() - a.mean())
    half = t_quantile(level, df) * se
    return Interval(value, value - half, value + half, level)


def run_medians(runs: list[FloatArray]) -> FloatArray:
    """One row per run: the median of each column over its steps (NaN ignored; a
    column without a value in a run is NaN)."""
    return np.vstack([_nanmedian(r, axis=0) for r in runs])


def spread_of(a: FloatArray, b: FloatArray) -> RunSpread:
    """The :class:`RunSpread` of the step medians ``a`` and ``b`` (one per run)."""
    base, new = [float(x) for x in a], [float(x) for x in b]
    if not spread_known(len(a), len(b)):
        return RunSpread(base, new, None, 0)
    logs = [np.log(a), np.log(b)]
    df = len(a) + len(b) - 2
    ss = sum(float(((x - x.mean()) ** 2).sum()) for x in logs)
    return RunSpread(base, new, 100 * (math.exp(math.sqrt(ss / df)) - 1), df)


def between_runs(a_runs: list[FloatArray], b_runs: list[FloatArray], family_size: int) -> RunStats:
    """B's runs against A's (each steps x columns, column 0 the step time, then the
    parts), runs that show their spread (:func:`spread_known`: 2 or more on a side, 1 or
    more on the other); ``family_size``: the parts judged together (the Bonferroni
    ``m``)."""
    a, b = run_medians(a_runs), run_medians(b_runs)
    log_a, log_b = np.log(a[:, 0]), np.log(b[:, 0])
    d = pooled(log_a, log_b, 1 - ALPHA)
    ratio = Interval(math.exp(d.value), math.exp(d.low), math.exp(d.high))
    m = max(1, family_size)
    changes = [pooled(a[:, i], b[:, i], 1 - ALPHA) for i in range(1, a.shape[1])]
    family = [_judged(a[:, i], b[:, i], 1 - ALPHA / m) for i in range(1, a.shape[1])]
    base = np.concatenate([[math.exp(log_a.mean())], _nanmean(a[:, 1:])])
    new = np.concatenate([[math.exp(log_b.mean())], _nanmean(b[:, 1:])])
    return RunStats(ratio, changes, family, base, new, spread_of(a[:, 0], b[:, 0]))


def _judged(a: FloatArray, b: FloatArray, level: float) -> Interval:
    """A part's family-wise interval, NaN bounds (never beyond its noise) unless each
    side has 2 runs or more with the part: one run's part is not judged (module
    docstring)."""
    if min(int(np.isfinite(a).sum()), int(np.isfinite(b).sum())) < 2:
        return Interval(math.nan, math.nan, math.nan, level)
    return pooled(a, b, level)


def _nanmean(values: FloatArray) -> FloatArray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a part no run has: NaN, said so
        return np.asarray(np.nanmean(values, axis=0), np.float64)


def beyond_noise(family: Interval, base_step: float) -> int:
    """+1 (the part surely rose), -1 (surely fell) or 0: its family-wise interval
    excludes 0 and its bound nearest 0 is at least :data:`MIN_PART_SHARE` of A's step."""
    floor = MIN_PART_SHARE * base_step
    if family.low >= floor:
        return 1
    if family.high <= -floor:
        return -1
    return 0
