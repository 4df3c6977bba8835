"""Arrow record batches built from buffers, for writers inside the training process.

``pa.array()`` and ``RecordBatch.from_pydict`` import pandas the first time they
run (pyarrow checks every input for a pandas object): ~0.5 s of the GIL taken
from the training thread at the agent's first flush, and ~50 MB more in the
training process (BENCHMARKS.md, "GIL handoffs"). The columns here are built
with numpy and ``pa.Array.from_buffers``, which never import it. A column type
not handled here (lists) falls back to ``pa.array``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa

_NUMPY = {
    pa.float64(): np.float64,
    pa.float32(): np.float32,
    pa.int64(): np.int64,
    pa.int32(): np.int32,
}

#: The values of one column: an Arrow array, a numpy array, or a sequence of Python
#: values (None for a null), of the type the schema gives the column.
ColumnValues: TypeAlias = pa.Array | npt.NDArray[np.generic] | Sequence[object]


def record_batch(columns: Mapping[str, ColumnValues], schema: pa.Schema) -> pa.RecordBatch:
    """One batch of ``schema`` from ``columns`` (Arrow arrays, numpy arrays or sequences)."""
    n = len(next(iter(columns.values())))
    arrays = [column(columns[f.name], f.type, n) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def column(values: ColumnValues, kind: pa.DataType, n: int) -> pa.Array:
    """``values`` (``n`` of them) as an Arrow array of type ``kind``."""
    if isinstance(values, pa.Array):
        return values
    if kind in _NUMPY:
        return _numeric(values, kind, n)
    if kind == pa.string() and None not in values:
        return _strings(cast("Sequence[str]", values), n)  # the schema says strings
    if kind == pa.bool_() and None not in values:
        bits = np.packbits(np.fromiter(values, np.bool_, count=n), bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])
    return pa.array(values, kind)  # lists, or nulls in strings: pandas is imported


def _numeric(
    values: npt.NDArray[np.generic] | Sequence[object], kind: pa.DataType, n: int
) -> pa.Array:
    dtype = _NUMPY[kind]
    if isinstance(values, np.ndarray):
        data = np.ascontiguousarray(values, dtype=dtype)
    elif None not in values:
        data = np.fromiter(values, dtype, count=n)
    else:  # device times of steps CUDA did not time
        valid = np.fromiter((v is not None for v in values), np.bool_, count=n)
        data = np.fromiter((0 if v is None else v for v in values), dtype, count=n)
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        null_count = n - int(valid.sum())
        return pa.Array.from_buffers(kind, n, [validity, pa.py_buffer(data)], null_count)
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(data)])


def _strings(values: Sequence[str], n: int) -> pa.Array:
    joined = "".join(values)
    parts: Sequence[str] | list[bytes]
    if joined.isascii():  # one encode; a character is a byte
        data, parts = joined.encode(), values
    else:
        parts = [v.encode() for v in values]
        data = b"".join(parts)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.fromiter(map(len, parts), np.int32, count=n), out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
