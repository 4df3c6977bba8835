"""Numpy views of TensorFlow values for the TF capture: conversion, reductions, names."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from stepscope.jobfolder.reductions import np_reduce


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
    return np_reduce(x, name) if x.size else float("nan")


def var_name(variable: object) -> str:
    """A Keras 3 variable's path (``dense/kernel``), else a tf.Variable's name."""
    name = getattr(variable, "path", None) or getattr(variable, "name", "variable")
    return str(name).removesuffix(":0")
