"""Columns of an Arrow table as numpy arrays, without pandas (``stepscope show``).

pyarrow's own ``to_numpy()`` imports pandas (~0.25 s, most of what ``show`` would
cost): numbers are read from the arrays' buffers instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from stepscope.analysis.downsample import FloatArray

if TYPE_CHECKING:
    import numpy.typing as npt
    import pyarrow as pa

# The Arrow types whose buffer is a plain numpy array; others go through Python.
_NUMERIC = {"float": np.float32, "double": np.float64, "int32": np.int32, "int64": np.int64}


def _floats(array: pa.Array) -> FloatArray:
    """A numeric Arrow array as float64, NaN for nulls and infinities (other types
    through Python)."""
    kind = _NUMERIC.get(str(array.type))
    if kind is None or not len(array):
        out: FloatArray = np.array(array.to_pylist(), dtype=np.float64).reshape(len(array))
        out[~np.isfinite(out)] = np.nan
        return out
    validity, data = array.buffers()[:2]
    values = np.frombuffer(
        data, dtype=kind, count=len(array), offset=array.offset * np.dtype(kind).itemsize
    )
    out = values.astype(np.float64)
    out[~np.isfinite(out)] = np.nan  # infinities are no measurement either
    if array.null_count and validity is not None:
        bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
        out[bits[array.offset : array.offset + len(array)] == 0] = np.nan
    return out


class Columns:
    """Columns of one stream as numpy arrays: floats with NaN for nulls (all NaN for a
    column the job lacks), strings as objects."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.names: list[str] = table.column_names
        self.rows: int = table.num_rows

    def floats(self, name: str) -> FloatArray:
        if name not in self.names:
            return np.full(self.rows, np.nan)
        chunks = [_floats(c) for c in self.table.column(name).chunks]
        return np.concatenate(chunks) if chunks else np.zeros(0)

    def strings(self, name: str) -> npt.NDArray[np.object_]:
        if name not in self.names:
            return np.full(self.rows, None, dtype=object)
        out = np.empty(self.rows, dtype=object)
        out[:] = self.table.column(name).to_pylist()
        return out
