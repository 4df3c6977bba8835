"""The training loop of benchmarks/tf_overhead.py: a small Keras MLP, ``fit`` or a custom
loop (``tf.function`` step over a ``tf.data`` iterator driven from Python).

Prints one JSON line: ``loop_s``, the seconds of the timed training after a warm-up
(tracing, first steps) that is not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("fit", "loop"), default="fit")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch", type=int, default=64)
    a = p.parse_args()
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(a.steps * a.batch, 64)).astype("float32")
    y = (x[:, :4].sum(axis=1, keepdims=True) > 0).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(a.batch).prefetch(2)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)
    opt = keras.optimizers.Adam(1e-3)
    if a.mode == "fit":
        model.compile(optimizer=opt, loss=loss_fn)
        model.fit(ds.take(20), epochs=1, verbose=0)  # warm-up: tracing
        t0 = time.perf_counter()
        model.fit(ds, epochs=1, verbose=0)
    else:

        @tf.function
        def step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        for xb, yb in ds.take(20):  # warm-up: tracing
            step(xb, yb)
        t0 = time.perf_counter()
        for xb, yb in ds:
            step(xb, yb)
    print(json.dumps({"loop_s": time.perf_counter() - t0, "mode": a.mode}))


if __name__ == "__main__":
    main()
