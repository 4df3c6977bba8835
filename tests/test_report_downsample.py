"""Downsampling for display: bounded size, spikes and gaps kept."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.analysis.downsample import (
    insert_gaps,
    mean_frame,
    minmax,
    minmax_frame,
)


def _series(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = 1_763_850_000.0 + np.arange(n) * 0.5
    return x, np.cumsum(rng.normal(size=n))


def test_short_series_unchanged_except_nan() -> None:
    x = np.arange(5.0)
    y = np.array([1.0, np.nan, 3.0, 4.0, 5.0])
    out_x, out_y = minmax(x, y, buckets=10)
    assert out_x.tolist() == [0.0, 2.0, 3.0, 4.0]
    assert out_y.tolist() == [1.0, 3.0, 4.0, 5.0]


def test_minmax_is_bounded_and_keeps_extremes_and_spike() -> None:
    x, y = _series(172_800)
    y[123_457] = 1e6  # one sample spike
    out_x, out_y = minmax(x, y, buckets=500)
    assert len(out_x) <= 1000
    assert out_y.max() == 1e6 and out_y.min() == y.min()
    assert x[123_457] in out_x
    assert np.all(np.diff(out_x) > 0)  # time order kept, no duplicates


def test_minmax_points_are_real_samples() -> None:
    x, y = _series(10_000, seed=3)
    out_x, out_y = minmax(x, y, buckets=100)
    pos = np.searchsorted(x, out_x)
    assert np.array_equal(x[pos], out_x) and np.array_equal(y[pos], out_y)


def test_minmax_frame_aligns_series_and_keeps_extremes() -> None:
    x, a = _series(50_000, seed=1)
    _, b = _series(50_000, seed=2)
    b[10] = np.nan
    a[40_000] = -500.0
    out_x, cols = minmax_frame(x, {"a": a, "b": b}, buckets=1000)
    assert len(out_x) == 2000 and set(cols) == {"a", "b"}
    assert all(len(v) == 2000 for v in cols.values())
    assert np.nanmin(cols["a"]) == -500.0 and np.nanmax(cols["a"]) == a.max()
    assert np.nanmax(cols["b"]) == np.nanmax(b) and np.nanmin(cols["b"]) == np.nanmin(b)
    assert out_x[0] >= x[0] and out_x[-1] <= x[-1]


def test_minmax_frame_earlier_extreme_first() -> None:
    x = np.arange(8.0)
    y = np.array(
        [5.0, 9.0, 1.0, 5.0, 0.0, 3.0, 7.0, 2.0]
    )  # bucket 0: max first; bucket 1: min first
    _, cols = minmax_frame(x, {"y": y}, buckets=2)
    assert cols["y"].tolist() == [9.0, 1.0, 0.0, 7.0]


def test_minmax_frame_empty_bucket_is_a_gap() -> None:
    x = np.r_[np.arange(0.0, 100.0, 0.5), np.arange(300.0, 400.0, 0.5)]
    y = np.ones_like(x)
    out_x, cols = minmax_frame(x, {"y": y}, buckets=100)
    gap = (out_x > 104) & (out_x < 296)
    assert gap.any() and np.isnan(cols["y"][gap]).all()
    holes = out_x[np.isnan(cols["y"])]
    assert holes.min() > 99.5 and holes.max() < 300


def test_minmax_frame_all_nan_column() -> None:
    x, _ = _series(5_000)
    _, cols = minmax_frame(x, {"gone": np.full(5_000, np.nan)}, buckets=100)
    assert np.isnan(cols["gone"]).all() and len(cols["gone"]) == 200


def test_mean_frame_keeps_sums_consistent() -> None:
    x, _ = _series(10_000)
    a, b = np.full(10_000, 1.0), np.linspace(0, 2, 10_000)
    centres, cols = mean_frame(x, {"a": a, "b": b}, buckets=100)
    assert len(centres) == 100
    _, total = mean_frame(x, {"t": a + b}, buckets=100)
    np.testing.assert_allclose(cols["a"] + cols["b"], total["t"])
    assert cols["b"].mean() == pytest.approx(1.0, rel=1e-3)


def test_insert_gaps() -> None:
    x = np.array([0.0, 1.0, 2.0, 10.0, 11.0])
    y = np.arange(5.0)
    gx, gy = insert_gaps(x, y, max_dx=3.0)
    assert gx.tolist() == [0.0, 1.0, 2.0, 6.0, 10.0, 11.0]
    assert np.isnan(gy[3]) and np.count_nonzero(np.isnan(gy)) == 1
