"""Numpy views of TensorFlow values for the TF capture: conversion, reductions, names."""

from __future__ import annotations

from collections.abc import Callable
from typing import SupportsFloat

import numpy as np
import numpy.typing as npt

_REDUCE: dict[str, Callable[[npt.NDArray[np.float64]], SupportsFloat]] = {
    "min": np.min,
    "max": np.max,
    "mean": np.mean,
    "std": np.std,
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
    "l1": lambda x: np.sum(np.abs(x)),
    "l2": lambda x: np.sqrt(np.sum(np.square(x))),
}


class Host:
    """The writer's view of a batch's values (``HostVector``'s duck): already on the host."""

    def __init__(self, values: list[float]) -> None:
        self.values = np.asarray(values, dtype=np.float64)

    def wait(self) -> None:
        return None

    def read(self) -> npt.NDArray[np.float64]:
        return self.values


def to_numpy(value: object) -> npt.NDArray[np.float64] | None:
    """A tensor, variable or number as float64 numpy (``.numpy()`` waits for it)."""
    method = getattr(value, "numpy", None)
    try:
        out: object = method() if callable(method) else value
        return np.asarray(out, dtype=np.float64)
    except (TypeError, ValueError):
        return None


def reduce(x: npt.NDArray[np.float64], name: str) -> float:
    """Reduction ``name`` (``l2``, ``abs_mean``, ...) of ``x``; NaN when empty."""
    base = name.removeprefix("abs_")
    data = np.abs(x) if base != name else x
    return float(_REDUCE[base](data)) if data.size else float("nan")


def var_name(variable: object) -> str:
    """A Keras 3 variable's path (``dense/kernel``), else a tf.Variable's name."""
    name = getattr(variable, "path", None) or getattr(variable, "name", "variable")
    return str(name).removesuffix(":0")
