"""A raw tensor's bytes as numpy (:func:`decode`) and the reductions of the agent
(:func:`np_reduce`), for the tensors' reader :mod:`stepscope.read._tensors`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from stepscope.jobfolder.reductions import np_reduce

_NUMPY = {
    "float32": "<f4",
    "float64": "<f8",
    "float16": "<f2",
    "int64": "<i8",
    "int32": "<i4",
    "int16": "<i2",
    "int8": "i1",
    "uint8": "u1",
    "bool": "?",
}
#: A raw tensor as read: numbers of the dtype it was saved in (bool for a mask).
RawTensor: TypeAlias = npt.NDArray[np.number] | npt.NDArray[np.bool_]
#: A saved tensor's value: a numpy array (a raw tensor) or a float (a scalar, a loss).
TensorValue: TypeAlias = RawTensor | float


def decode(data: bytes, dtype: str, shape: Sequence[int]) -> RawTensor:
    """A raw tensor's bytes as a numpy array (bfloat16 widened exactly to float32)."""
    if dtype == "bfloat16":
        bits = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(tuple(shape))
    if dtype not in _NUMPY:
        raise ValueError(f"Cannot decode a tensor of dtype {dtype!r}; known: {sorted(_NUMPY)}.")
    return np.frombuffer(data, dtype=_NUMPY[dtype]).reshape(tuple(shape)).copy()


__all__ = ["RawTensor", "TensorValue", "decode", "np_reduce"]
