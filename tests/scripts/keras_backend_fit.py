"""A small Keras 3 MLP trained with ``model.fit`` on whatever backend ``KERAS_BACKEND``
names (torch, jax), unchanged for stepscope: numpy arrays in, no TensorFlow import.

``--validate`` adds validation data (2 batches an epoch) and an ``evaluate`` of 3
batches; ``--save`` writes the weights after training (bit-for-bit tests).
"""

from __future__ import annotations

import argparse
import random

import keras
import numpy as np


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batches", type=int, default=20, help="batches per epoch")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--validate", action="store_true", help="validation data and an evaluate")
    p.add_argument("--eager", action="store_true", help="run_eagerly=True")
    p.add_argument("--save", default="")
    a = p.parse_args()

    # Not keras.utils.set_random_seed: it imports TensorFlow when installed (seconds of
    # CPU, and a TensorFlow-free process is what the backends' tests are about).
    random.seed(a.seed)  # Keras draws its initializers' seeds from Python's generator
    np.random.seed(a.seed)
    rng = np.random.default_rng(a.seed)
    n = a.batches * a.batch
    x = rng.normal(size=(n, 32)).astype("float32")
    y = (x[:, :4].sum(axis=1, keepdims=True) > 0).astype("float32")
    model = keras.Sequential(
        [
            keras.Input((32,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=["accuracy"],
        run_eagerly=a.eager,
    )
    val = (x[: 2 * a.batch], y[: 2 * a.batch]) if a.validate else None
    model.fit(
        x, y, batch_size=a.batch, epochs=a.epochs, verbose=0, shuffle=False, validation_data=val
    )
    if a.validate:
        model.evaluate(x[: 3 * a.batch], y[: 3 * a.batch], batch_size=a.batch, verbose=0)
    if a.save:
        np.savez(a.save, *[np.asarray(keras.ops.convert_to_numpy(v)) for v in model.weights])


if __name__ == "__main__":
    main()
