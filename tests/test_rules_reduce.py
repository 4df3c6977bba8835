"""The numpy reductions of the rules give pandas' numbers exactly (same dtype, same bits)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stepscope.rules._reduce import Groups, Windows, peer_medians


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_peer_medians_equal_pandas_median_of_the_other_columns(dtype: type) -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        rows, cols = rng.integers(1, 6), rng.integers(2, 9)
        x = rng.choice([0.1, 0.3, 1.0, 2.5, 3.0], size=(rows, cols)) + rng.random((rows, cols))
        x = x.astype(dtype)
        x[rng.random((rows, cols)) < 0.3] = np.nan
        frame = pd.DataFrame(x)
        expected = np.column_stack(
            [frame.drop(columns=c).median(axis=1).to_numpy() for c in frame.columns]
        )
        got = peer_medians(x)
        assert got.dtype == expected.dtype
        assert np.array_equal(got, expected, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_groups_equal_pandas_groupby(dtype: type) -> None:
    rng = np.random.default_rng(1)
    for _ in range(100):
        n = int(rng.integers(1, 300))
        frame = pd.DataFrame(
            {
                "win": rng.integers(0, 4, n),
                "rank": rng.integers(0, 5, n).astype(np.int32),
                "value": (rng.random(n) * 3).astype(dtype),
                "start": rng.random(n),
                "node": rng.choice(["a", "b"], n),
            }
        )
        frame.loc[rng.random(n) < 0.2, "value"] = np.nan
        expected = frame.groupby(["win", "rank"]).agg(
            value=("value", "median"),
            start=("start", "min"),
            end=("start", "max"),
            node=("node", "first"),
        )
        g = Groups(frame["win"].to_numpy(), frame["rank"].to_numpy())
        assert np.array_equal(g.keys[0], expected.index.get_level_values(0))
        assert np.array_equal(g.keys[1], expected.index.get_level_values(1))
        got = g.median(frame["value"].to_numpy())
        assert got.dtype == expected["value"].dtype
        assert np.array_equal(got, expected["value"].to_numpy(), equal_nan=True)
        assert np.array_equal(g.min(frame["start"].to_numpy()), expected["start"].to_numpy())
        assert np.array_equal(g.max(frame["start"].to_numpy()), expected["end"].to_numpy())
        assert list(g.first(frame["node"].to_numpy())) == list(expected["node"])


def test_window_quantiles_equal_pandas_quantiles() -> None:
    rng = np.random.default_rng(2)
    n = 1000
    x = rng.normal(80, 10, (n, 3)).round().astype(np.float32).astype(np.float64)
    x[rng.random(n) < 0.1, 1] = np.nan  # NaNs in one column: the per-column path
    x[:, 2] = np.nan
    framed = pd.DataFrame({"time": np.arange(n) * 0.5, "win": np.arange(n) // 300})
    w = Windows(framed)
    got = w.quantiles(x, [0.05, 0.95])
    for k, (_, rows) in enumerate(pd.DataFrame(x).groupby(framed["win"])):
        expected = rows.quantile([0.05, 0.95]).to_numpy()
        assert np.array_equal(got[k], expected, equal_nan=True)
