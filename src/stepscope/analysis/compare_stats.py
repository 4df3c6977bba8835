"""The statistics of ``stepscope compare``: a moving-block bootstrap over steady steps.

Neighbouring steps are correlated (a busy host slows a run of steps, not one), so
resampling single steps would understate the noise and call a swing of the host a
change. The bootstrap resamples **blocks of consecutive steps** (Kunsch's moving
block bootstrap) of length about ``n ** (1/3)`` (the order Hall, Horowitz and Jing
found best for variance and interval estimates), at least :data:`MIN_BLOCK`. Each
run is resampled on its own, the median of each resample taken, and the 2.5th and
97.5th percentiles of the ratio B/A (of the part differences B-A) are the 95%
interval. The generator is seeded, so the same jobs give the same output.

Medians, never means: one stalled step moves a mean of a noisy host by more than a
real change.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from stepscope.analysis.downsample import FloatArray, IntArray

RESAMPLES = 1000
SEED = 20261201
MIN_BLOCK = 3
CHUNK_CELLS = 4_000_000  # resampled values held at once: a long job's memory stays small


@dataclass(frozen=True)
class Interval:
    """A point estimate and its interval (``level``: 0.95 unless a family's)."""

    value: float
    low: float
    high: float
    level: float = 0.95


def block_length(n: int) -> int:
    """The block of consecutive steps resampled as one (module docstring)."""
    return max(MIN_BLOCK, round(n ** (1 / 3))) if n else MIN_BLOCK


def block_indices(n: int, reps: int, rng: np.random.Generator) -> IntArray:
    """``reps`` resamples of ``range(n)`` as blocks of consecutive rows (reps x n)."""
    size = min(block_length(n), n)
    blocks = -(-n // size)
    starts = rng.integers(0, n - size + 1, size=(reps, blocks))
    idx = (starts[:, :, None] + np.arange(size)[None, None, :]).reshape(reps, -1)
    out: IntArray = idx[:, :n]
    return out


def resampled_medians(columns: FloatArray, idx: IntArray) -> FloatArray:
    """Per resample (row of ``idx``) and column of ``columns`` (steps x k): the median,
    NaN ignored. Done in chunks of resamples so that memory stays bounded."""
    reps, n = idx.shape
    k = columns.shape[1]
    out = np.empty((reps, k))
    chunk = max(1, CHUNK_CELLS // max(1, n * k))
    for lo in range(0, reps, chunk):
        taken = columns[idx[lo : lo + chunk]]  # chunk x n x k
        out[lo : lo + chunk] = _nanmedian(taken, axis=1)
    return out


def _nanmedian(values: FloatArray, axis: int) -> FloatArray:
    if not np.isnan(values).any():
        return np.asarray(np.median(values, axis=axis), np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN part: NaN, said as such
        return np.asarray(np.nanmedian(values, axis=axis), np.float64)


@dataclass(frozen=True)
class Bootstrap:
    """Column medians of two runs and the resampled ones (reps x k)."""

    base: FloatArray
    new: FloatArray
    base_reps: FloatArray
    new_reps: FloatArray

    def ratio(self, col: int) -> Interval:
        """Median B / median A of column ``col``, with its interval."""
        with np.errstate(all="ignore"):
            reps = self.new_reps[:, col] / self.base_reps[:, col]
        return _interval(float(self.new[col] / self.base[col]), reps)

    def difference(self, col: int) -> Interval:
        """Median B - median A of column ``col`` (seconds), with its interval."""
        reps = self.new_reps[:, col] - self.base_reps[:, col]
        return _interval(float(self.new[col] - self.base[col]), reps)


def _interval(value: float, reps: FloatArray) -> Interval:
    reps = reps[np.isfinite(reps)]
    if not len(reps) or not np.isfinite(value):
        return Interval(value, float("nan"), float("nan"))
    low, high = np.percentile(reps, [2.5, 97.5])
    return Interval(value, float(low), float(high))


def bootstrap(base: FloatArray, new: FloatArray, seed: int = SEED) -> Bootstrap:
    """The medians of the columns of ``base`` and ``new`` (steps x k, in step order)
    and :data:`RESAMPLES` block-bootstrap medians of each."""
    rng = np.random.default_rng(seed)
    base_idx = block_indices(len(base), RESAMPLES, rng)
    new_idx = block_indices(len(new), RESAMPLES, rng)
    return Bootstrap(
        _nanmedian(base, axis=0),
        _nanmedian(new, axis=0),
        resampled_medians(base, base_idx),
        resampled_medians(new, new_idx),
    )
