"""Long (bin, key, value) triples pivoted into stepscope's wide system rows."""

from __future__ import annotations

import warnings

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from stepscope.importers.sagemaker._metrics import WIDE_64, Placement, column_order
from stepscope.jobfolder import SYSTEM_BASE_SCHEMA

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


def wide_table(
    node: str,
    interval_ms: int,
    times: Floats,
    bins: Ints,
    keys: Ints,
    values: Floats,
    placements: list[Placement],
) -> pa.Table:
    """One row per bin; a key sampled twice in a bin is averaged, then keys that share a
    column are combined by their aggregation. Columns never measured stay null."""
    rows, row = np.unique(bins, return_inverse=True)
    nk = len(placements)
    flat = row.astype(np.int64) * nk + keys
    sums = np.bincount(flat, weights=values, minlength=len(rows) * nk)
    counts = np.bincount(flat, minlength=len(rows) * nk)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_key = (sums / counts).reshape(len(rows), nk)
    by_column: dict[str, list[int]] = {}
    for i, (col, _) in enumerate(placements):
        by_column.setdefault(col, []).append(i)
    out: dict[str, Floats] = {}
    for col, ids in by_column.items():
        out[col] = _combine(per_key[:, ids], placements[ids[0]][1])
    cores = [c for c in out if c[3:].isdigit()]
    if cores:
        out["cpu"] = _combine(np.stack([out[c] for c in cores], axis=1), "mean")
    return _table(node, interval_ms, times, out)


def _combine(block: Floats, agg: str) -> Floats:
    """Mean or sum across a column's keys; null where none of them was measured."""
    measured = ~np.isnan(block)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-null row is null, on purpose
        value = np.nanmean(block, axis=1) if agg == "mean" else np.nansum(block, axis=1)
    result: Floats = np.where(measured.any(axis=1), value, np.nan)
    return result


def _table(node: str, interval_ms: int, times: Floats, out: dict[str, Floats]) -> pa.Table:
    n = len(times)
    cols: dict[str, pa.Array] = {
        "time": pa.array(times, pa.float64()),
        "node": pa.array([node] * n, pa.string()),
        "interval_ms": pa.array(np.full(n, interval_ms, np.int32)),
    }
    order = (["cpu"] if "cpu" in out else []) + column_order(set(out) - {"cpu"})
    for col in order:
        kind = pa.float64() if col in WIDE_64 else pa.float32()
        cols[col] = pa.array(out[col].astype(kind.to_pandas_dtype()), kind, from_pandas=True)
    for f in SYSTEM_BASE_SCHEMA:  # never measured by the predecessor: null, not zero
        if f.name not in cols:
            cols[f.name] = pa.nulls(n, f.type)
    return pa.table(cols)
