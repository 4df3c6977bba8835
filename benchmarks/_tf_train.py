"""The training of benchmarks/tf_overhead.py: a small Keras MLP, ``fit`` or a custom
loop (``tf.function`` step over a ``tf.data`` iterator driven from Python).

Run as a script (whole runs), prints one JSON line: ``loop_s``, the seconds of the
timed training after a warm-up (tracing, first steps) that is not timed.
``Training`` is the same training for benchmarks/_tf_switched.py, in blocks.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf


def dataset(batches: int, batch: int = 64) -> tf.data.Dataset:
    """``batches`` seeded batches of 64 features and a binary label."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batches * batch, 64)).astype("float32")
    y = (x[:, :4].sum(axis=1, keepdims=True) > 0).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).prefetch(2)


class Training:
    """The model, its optimizer and a compiled step; seeded."""

    def __init__(self) -> None:
        keras.utils.set_random_seed(0)
        self.model = keras.Sequential(
            [
                keras.Input((64,)),
                keras.layers.Dense(256, activation="relu"),
                keras.layers.Dense(256, activation="relu"),
                keras.layers.Dense(1),
            ]
        )
        self.loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)
        self.opt = keras.optimizers.Adam(1e-3)

    def compile(self) -> None:
        """For ``fit``."""
        self.model.compile(optimizer=self.opt, loss=self.loss_fn)

    def step_function(self) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
        """The custom loop's step: forward, gradients and update in one ``tf.function``."""
        model, loss_fn, opt = self.model, self.loss_fn, self.opt

        @tf.function
        def step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        return step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("fit", "loop"), default="fit")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch", type=int, default=64)
    a = p.parse_args()
    tr = Training()
    ds = dataset(a.steps, a.batch)
    if a.mode == "fit":
        tr.compile()
        tr.model.fit(ds.take(20), epochs=1, verbose=0)  # warm-up: tracing
        t0 = time.perf_counter()
        tr.model.fit(ds, epochs=1, verbose=0)
    else:
        step = tr.step_function()
        for xb, yb in ds.take(20):  # warm-up: tracing
            step(xb, yb)
        t0 = time.perf_counter()
        for xb, yb in ds:
            step(xb, yb)
    print(json.dumps({"loop_s": time.perf_counter() - t0, "mode": a.mode}))


if __name__ == "__main__":
    main()
