"""The debugger's event files: TFRecord framing around TensorFlow ``Event`` protos.

Only what the debugger writes is decoded, by hand (no TensorFlow, no protobuf
package): ``Event{1: wall_time, 2: step, 5: Summary{1: Value{1: tag, 2: simple_value,
8: TensorProto}}}`` and ``TensorProto{1: dtype, 2: shape{2: dim{1: size}}, 4: content,
5: float_val, 6: double_val, 7: int_val, 10: int64_val, 11: bool_val, 13: half_val}``.
Record CRCs are not checked: a damaged record fails to decode and is counted.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# TensorFlow's DataType numbers -> (our dtype name, numpy little-endian type).
DTYPES: dict[int, tuple[str, str]] = {
    1: ("float32", "<f4"), 2: ("float64", "<f8"), 3: ("int32", "<i4"), 4: ("uint8", "u1"),
    5: ("int16", "<i2"), 6: ("int8", "i1"), 9: ("int64", "<i8"), 10: ("bool", "?"),
    14: ("bfloat16", "<i2"), 19: ("float16", "<f2"),
}  # fmt: skip
_REPEATED = {5: "<f4", 6: "<f8", 7: "varint", 10: "varint", 11: "varint", 13: "varint"}


@dataclass
class TensorValue:
    """One tensor of an event: its name, dtype name, shape and values."""

    name: str
    dtype: str
    shape: list[int]
    array: npt.NDArray[np.generic]


def records(data: bytes) -> Iterator[bytes]:
    """The payloads of a TFRecord file: ``u64 length, u32 crc, data, u32 crc``."""
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        start = pos + 12
        if start + length + 4 > len(data):
            raise ValueError(f"record at byte {pos} is cut short")
        yield data[start : start + length]
        pos = start + length + 4


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)``: ints for varints, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        num, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield num, wire, value
        elif wire == 1:
            yield num, wire, buf[pos : pos + 8]
            pos += 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            yield num, wire, buf[pos : pos + n]
            pos += n
        elif wire == 5:
            yield num, wire, buf[pos : pos + 4]
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def event_tensors(record: bytes) -> tuple[float, int, list[TensorValue]]:
    """An Event's wall time, step and tensors."""
    wall, step, out = 0.0, 0, []
    for num, _, value in fields(record):
        if num == 1 and isinstance(value, bytes):
            (wall,) = struct.unpack("<d", value)
        elif num == 2 and isinstance(value, int):
            step = value
        elif num == 5 and isinstance(value, bytes):
            out += [t for _, _, v in fields(value) if isinstance(v, bytes) if (t := _value(v))]
    return wall, step, out


def _value(buf: bytes) -> TensorValue | None:
    tag, tensor, simple = "", None, None
    for num, _, value in fields(buf):
        if num == 1 and isinstance(value, bytes):
            tag = value.decode("utf-8", "replace")
        elif num == 2 and isinstance(value, bytes):
            (simple,) = struct.unpack("<f", value)
        elif num == 8 and isinstance(value, bytes):
            tensor = value
    if tensor is not None:
        return _tensor(tag, tensor)
    if simple is not None:
        return TensorValue(tag, "float32", [], np.array(simple, np.float32))
    return None


def _tensor(tag: str, buf: bytes) -> TensorValue:
    dtype, shape, content = 1, [], b""
    repeated: list[float] = []
    for num, wire, value in fields(buf):
        if num == 1 and isinstance(value, int):
            dtype = value
        elif num == 2 and isinstance(value, bytes):
            shape = [_dim(d) for n, _, d in fields(value) if n == 2 and isinstance(d, bytes)]
        elif num == 4 and isinstance(value, bytes):
            content = value
        elif num in _REPEATED:
            repeated += _repeated(num, wire, value)
    if dtype not in DTYPES:
        raise ValueError(f"tensor {tag!r} has TensorFlow dtype {dtype}, which has no place here")
    name, np_type = DTYPES[dtype]
    size = int(np.prod(shape)) if shape else 1
    if content:
        array = np.frombuffer(content, np_type).copy()
    else:
        values = np.array(repeated or [0], np.float64 if "f" in np_type else np.int64)
        array = np.resize(values, size).astype(np_type)  # a repeated value fills the shape
    return TensorValue(tag, name, shape, array.reshape(shape))


def _dim(buf: bytes) -> int:
    for num, _, value in fields(buf):
        if num == 1 and isinstance(value, int):
            return value - (1 << 64) if value >= 1 << 63 else value
    return 0


def _repeated(num: int, wire: int, value: int | bytes) -> list[float]:
    kind = _REPEATED[num]
    if isinstance(value, int):
        return [value - (1 << 64) if value >= 1 << 63 else value]
    if wire == 5:
        return [struct.unpack("<f", value)[0]]
    if wire == 1:
        return [struct.unpack("<d", value)[0]]
    if kind == "varint":  # packed varints
        out: list[float] = []
        pos = 0
        while pos < len(value):
            v, pos = _varint(value, pos)
            out.append(v - (1 << 64) if v >= 1 << 63 else v)
        return out
    return [float(x) for x in np.frombuffer(value, kind)]
