"""Out-of-range values in segments: what readers read as missing or leave out.

A segment can hold values no writer meant: NaN or infinite numbers, times that
are not unix seconds of this era (a flipped bit, another tool's milliseconds).
Readers read non-finite floats as nulls and leave out rows whose times are
outside :data:`stepscope.jobfolder.TIME_RANGE` (docs/format.md, "Damaged job
folders"); a segment's row-group statistics tell, without reading its rows,
whether it holds any, so that a warning can name it.
"""

from __future__ import annotations

import math
import struct

import pyarrow as pa
import pyarrow.parquet as pq

from stepscope.jobfolder import TIME_RANGE

#: The columns of the row streams that hold unix times.
TIME_COLUMNS = ("time", "start", "end")


def out_of_range(meta: pq.FileMetaData) -> tuple[str, ...]:
    """Columns whose row-group statistics hold a non-finite number or an absurd time."""
    found: set[str] = set()
    lo, hi = TIME_RANGE
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            col = group.column(c)
            stats = col.statistics
            if stats is None or not stats.has_min_max:
                continue
            ends = (stats.min, stats.max)
            if not all(isinstance(v, int | float) for v in ends):
                continue
            name = col.path_in_schema
            if not all(math.isfinite(v) for v in ends) or (
                name in TIME_COLUMNS and (ends[0] < lo or ends[1] > hi)
            ):
                found.add(name)
    return tuple(sorted(found))


def clean_floats(table: pa.Table) -> pa.Table:
    """``table`` with NaN and infinities as nulls, and rows whose times (:data:`TIME_COLUMNS`)
    are outside :data:`TIME_RANGE` left out: what readers do with out-of-range values."""
    if not any(pa.types.is_floating(f.type) or f.name in TIME_COLUMNS for f in table.schema):
        return table  # nothing to clean (`stepscope ls` reads phases only): no compute
    import pyarrow.compute as pc

    keep = None
    lo, hi = (_scalar(pa.float64(), struct.pack("<d", t)) for t in TIME_RANGE)
    for i, f in enumerate(table.schema):
        col = table.column(i)
        if f.name in TIME_COLUMNS and (pa.types.is_floating(f.type) or pa.types.is_integer(f.type)):
            ok = pc.fill_null(pc.and_(pc.greater_equal(col, lo), pc.less_equal(col, hi)), _FALSE)
            keep = ok if keep is None else pc.and_(keep, ok)
        elif pa.types.is_floating(f.type):
            nulls = pa.nulls(len(col), f.type)
            table = table.set_column(i, f, pc.if_else(pc.is_finite(col), col, nulls))
    return table if keep is None else table.filter(keep)


def _scalar(kind: pa.DataType, raw: bytes) -> pa.Scalar:
    """A scalar built from its bytes: ``pa.scalar(x)`` of a Python value imports pandas
    (pyarrow looks for pandas' NA), which `stepscope show` does not otherwise need."""
    return pa.Array.from_buffers(kind, 1, [None, pa.py_buffer(raw)])[0]


_FALSE = _scalar(pa.bool_(), b"\x00")
