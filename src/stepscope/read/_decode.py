"""A raw tensor's bytes as numpy (:func:`decode`) and the reductions of the agent
(:func:`np_reduce`), for the tensors' reader :mod:`stepscope.read._tensors`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import SupportsFloat, TypeAlias

import numpy as np
import numpy.typing as npt

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

_NP_REDUCE: dict[str, Callable[[npt.NDArray[np.float64]], SupportsFloat]] = {
    "min": np.min,
    "max": np.max,
    "mean": np.mean,
    "std": np.std,
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
    "l1": lambda x: np.abs(x).sum(),
    "l2": lambda x: np.sqrt(np.square(x, dtype=np.float64).sum()),
}


def decode(data: bytes, dtype: str, shape: Sequence[int]) -> RawTensor:
    """A raw tensor's bytes as a numpy array (bfloat16 widened exactly to float32)."""
    if dtype == "bfloat16":
        bits = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(tuple(shape))
    if dtype not in _NUMPY:
        raise ValueError(f"Cannot decode a tensor of dtype {dtype!r}; known: {sorted(_NUMPY)}.")
    return np.frombuffer(data, dtype=_NUMPY[dtype]).reshape(tuple(shape)).copy()


def np_reduce(x: npt.ArrayLike, name: str) -> float:
    """Reduction ``name`` (``l2``, ``abs_mean``, ...) of an array, as the agent computes it."""
    base = name.removeprefix("abs_")
    if base not in _NP_REDUCE:
        raise KeyError(
            f"Unknown reduction {name!r}. Known: {', '.join(_NP_REDUCE)} and their abs_ forms."
        )
    values = np.asarray(x, dtype=np.float64)
    return float(_NP_REDUCE[base](np.abs(values) if base != name else values))
