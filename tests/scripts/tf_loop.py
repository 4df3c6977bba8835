"""A custom TensorFlow training loop: GradientTape + optimizer.apply_gradients, unchanged.

``--compiled`` puts the step in a ``tf.function``. Planted problems: ``--stall-at N
--stall S`` (a sleep after step N), ``--slow-data S`` (a Python generator that sleeps
S seconds per batch: a starved input pipeline), ``--nan-from N`` (NaN labels from
step N on), ``--deep sigmoid`` (a deep sigmoid stack with tiny initial weights:
vanishing gradients; ``--deep relu`` is its healthy twin).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _tf_setup
import keras
import numpy as np
import tensorflow as tf


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compiled", action="store_true")
    p.add_argument("--loss-scale", action="store_true", help="a LossScaleOptimizer around SGD")
    p.add_argument("--stall-at", type=int, default=-1)
    p.add_argument("--stall", type=float, default=0.0)
    p.add_argument("--nan-from", type=int, default=-1)
    p.add_argument("--slow-data", type=float, default=0.0)
    p.add_argument("--deep", choices=["sigmoid", "relu"], default="")
    p.add_argument("--save", default="")
    a = p.parse_args()

    x, y = _tf_setup.seeded_data(a, a.steps * a.batch, 256)

    def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for i in range(a.steps):
            if a.slow_data > 0:
                time.sleep(a.slow_data)
            yield x[i * a.batch : (i + 1) * a.batch], y[i * a.batch : (i + 1) * a.batch]

    spec = (tf.TensorSpec((None, 256), tf.float32), tf.TensorSpec((None, 1), tf.float32))
    ds = tf.data.Dataset.from_generator(batches, output_signature=spec)
    if a.deep:  # sigmoid: each layer shrinks the gradient ~100x on its way back
        init = keras.initializers.RandomNormal(stddev=0.01) if a.deep == "sigmoid" else "he_normal"
        hidden = [keras.layers.Dense(32, a.deep, kernel_initializer=init) for _ in range(6)]
    else:
        hidden = [keras.layers.Dense(a.hidden, activation="relu")]
    model = keras.Sequential([keras.Input((256,)), *hidden, keras.layers.Dense(1)])
    loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)
    opt = keras.optimizers.SGD(0.05)
    if a.loss_scale:  # applies through its inner optimizer's apply: one step, not two
        opt = keras.optimizers.LossScaleOptimizer(opt)

    def train_step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    step_fn = tf.function(train_step) if a.compiled else train_step
    for i, (xb, yb) in enumerate(ds):
        step_fn(xb, yb)
        if i == a.stall_at:
            time.sleep(a.stall)
    _tf_setup.save(model, a.save)


if __name__ == "__main__":
    main()
