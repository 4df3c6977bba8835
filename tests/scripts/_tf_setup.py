"""What the TensorFlow test scripts (keras_fit.py, tf_loop.py) share: a seeded and
deterministic start with its data, and the saved weights.

The scripts run as ``python script.py``, which puts this folder first on ``sys.path``:
they import this module by its name (a wrapper that runs them with ``runpy`` puts
their folder there as Python does).
"""

from __future__ import annotations

import argparse

import keras
import numpy as np
import numpy.typing as npt
import tensorflow as tf

Array = npt.NDArray[np.float32]


def seeded_data(a: argparse.Namespace, rows: int, features: int) -> tuple[Array, Array]:
    """Seeds Keras (``--seed``), makes TensorFlow's ops deterministic, and returns ``rows``
    inputs of ``features`` normal values with their labels (whether the first 4 sum
    above 0), NaN from batch ``--nan-from`` on (batches of ``--batch``)."""
    keras.utils.set_random_seed(a.seed)
    tf.config.experimental.enable_op_determinism()
    rng = np.random.default_rng(a.seed)
    x = rng.normal(size=(rows, features)).astype("float32")
    y = (x[:, :4].sum(axis=1, keepdims=True) > 0).astype("float32")
    if a.nan_from >= 0:
        y[a.nan_from * a.batch :] = np.nan
    return x, y


def save(model: keras.Model, path: str) -> None:
    """The model's weights to ``path`` (``.npz``, in order), when one is given."""
    if path:
        np.savez(path, *[v.numpy() for v in model.weights])
