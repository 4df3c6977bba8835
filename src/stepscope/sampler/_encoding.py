"""Arrow encoding of system-metric rows: the types, rounding and buffers of ``system/``.

Batches round percentages to 0.1 and byte rates to whole bytes/s: finer digits are
noise (CPU time is counted in 10 ms ticks), and Parquet's dictionary encoding then
stores most values in 1-2 bytes (docs/format.md).
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable
from functools import lru_cache

import pyarrow as pa

from stepscope.jobfolder import OTHERS_SCHEMA, SYSTEM_SCHEMA
from stepscope.sampler._nvml import Row, Value

# The same values as stepscope.config.SYSTEM_MONITOR_INTERVALS (a test checks it); not
# imported from there to keep the sampler process's start-up short.
ACCEPTED_INTERVALS_MS = (100, 200, 500, 1000, 5000, 60000)
_BASE_TYPES = {field.name: field.type for field in SYSTEM_SCHEMA}
_CODES = {pa.float32(): "f", pa.float64(): "d", pa.int32(): "i"}  # array module type codes
_BYTE_RATES = {"disk_read_bps", "disk_write_bps", "net_rx_bps", "net_tx_bps"}
_BYTE_RATES |= {"swap_in_bps", "swap_out_bps", "proc_read_bps", "proc_write_bps"}


def validate_interval_ms(value: object) -> int:
    """``value`` if it is an accepted sampling interval, else a ValueError that lists them."""
    if isinstance(value, bool) or value not in ACCEPTED_INTERVALS_MS:
        accepted = ", ".join(map(str, ACCEPTED_INTERVALS_MS))
        name = "system_monitor_interval_millis"
        raise ValueError(f"Invalid value {value} for {name}. Accepted values are {accepted}.")
    return int(value)


def column_type(name: str) -> pa.DataType:
    """Arrow type of a column of ``system/<node>/`` (docs/format.md)."""
    if name in _BASE_TYPES:
        return _BASE_TYPES[name]
    if name.endswith(("_mem_used", "_mem_total")):
        return pa.float64()
    return pa.float32()  # cpu<i> and the other gpu<i>_* columns


@lru_cache(maxsize=32)
def schema_for(names: tuple[str, ...]) -> pa.Schema:
    return pa.schema([pa.field(name, column_type(name)) for name in names])


def rows_to_batches(rows: Iterable[Row]) -> list[pa.RecordBatch]:
    """One record batch per run of rows with the same columns (a GPU may vanish)."""
    return [_batch(names, list(group)) for names, group in itertools.groupby(rows, key=tuple)]


def others_batch(rows: list[Row]) -> pa.RecordBatch:
    """The rows of ``others/<node>/`` (docs/format.md) as one record batch."""
    arrays = [_array(field, [row[field.name] for row in rows]) for field in OTHERS_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=OTHERS_SCHEMA)


def _batch(names: tuple[str, ...], rows: list[Row]) -> pa.RecordBatch:
    schema = schema_for(names)
    arrays = [_array(field, [row[field.name] for row in rows]) for field in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# Arrays are built from buffers: pa.array() imports pandas (0.4 s, 60 MB) on first use
# to check whether its input is a pandas object, and the sampler must start light.
def _array(field: pa.Field, values: list[Value]) -> pa.Array:
    if field.type == pa.string():
        data = [str(v).encode() for v in values]
        offsets = array("i", itertools.accumulate(map(len, data), initial=0))
        return pa.Array.from_buffers(field.type, len(data), [None, _buffer(offsets), _buffer(data)])
    digits = 1 if field.type == pa.float32() else 0 if field.name in _BYTE_RATES else None
    numbers = array(_CODES[field.type], [_number(v, digits) for v in values])
    return pa.Array.from_buffers(field.type, len(values), [_validity(values), _buffer(numbers)])


def _number(value: Value, digits: int | None) -> float:
    if value is None:
        return 0
    if isinstance(value, str):
        raise TypeError(f"a number column holds the string {value!r}")
    return round(value, digits) if digits is not None else value


def _validity(values: list[Value]) -> pa.Buffer | None:
    """Arrow's validity bitmap (bit ``i`` of byte ``i // 8`` set when value ``i`` is there)."""
    if all(v is not None for v in values):
        return None
    bits = bytearray((len(values) + 7) // 8)
    for i, value in enumerate(values):
        if value is not None:
            bits[i >> 3] |= 1 << (i & 7)
    return _buffer(bits)


def _buffer(data: array[int] | array[float] | bytearray | list[bytes]) -> pa.Buffer:
    return pa.py_buffer(b"".join(data) if isinstance(data, list) else data)
