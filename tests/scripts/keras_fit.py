"""A small Keras 3 MLP trained with ``model.fit`` (TensorFlow backend), unchanged for stepscope.

Planted problems for the tests: ``--stall-at N --stall S`` sleeps S seconds in a
callback after batch N; ``--nan-from N`` makes the labels NaN from batch N on (a
NaN loss); ``--slow-data S`` sleeps S seconds per batch inside the tf.data pipeline;
``--deep sigmoid`` is a deep sigmoid stack with tiny initial weights (vanishing
gradients), ``--deep relu`` its healthy twin. ``--batch-logs PATH`` writes the logs
Keras gives each train batch's callbacks (JSON lines).
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _tf_setup
import keras
import tensorflow as tf


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batches", type=int, default=40, help="batches per epoch")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eager", action="store_true", help="run_eagerly=True")
    p.add_argument("--validate", action="store_true", help="validation data and a predict")
    p.add_argument("--stall-at", type=int, default=-1)
    p.add_argument("--stall", type=float, default=0.0)
    p.add_argument("--nan-from", type=int, default=-1)
    p.add_argument("--slow-data", type=float, default=0.0)
    p.add_argument("--deep", choices=["sigmoid", "relu"], default="")
    p.add_argument("--batch-logs", default="")
    p.add_argument("--save", default="")
    a = p.parse_args()

    x, y = _tf_setup.seeded_data(a, a.batches * a.batch, 32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(a.batch)
    if a.slow_data > 0:

        def slow(xb: tf.Tensor, yb: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            tf.py_function(lambda: time.sleep(a.slow_data), [], [])
            return xb, yb

        ds = ds.map(slow)
    model = keras.Sequential([keras.Input((32,)), *hidden(a.deep), keras.layers.Dense(1)])
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=["accuracy"],
        run_eagerly=a.eager,
    )

    class Stall(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: dict[str, float] | None = None) -> None:
            if batch == a.stall_at:
                time.sleep(a.stall)
            if a.batch_logs:
                with open(a.batch_logs, "a") as f:
                    f.write(json.dumps({k: float(v) for k, v in (logs or {}).items()}) + "\n")

    val = ds.take(4) if a.validate else None
    model.fit(ds, epochs=a.epochs, verbose=0, callbacks=[Stall()], validation_data=val)
    if a.validate:
        model.predict(ds.take(3), verbose=0)
    _tf_setup.save(model, a.save)


def hidden(deep: str) -> list[keras.layers.Layer]:
    """The hidden layers: two ReLU layers, or a deep stack (``--deep``)."""
    if not deep:
        return [keras.layers.Dense(64, activation="relu") for _ in range(2)]
    # Sigmoid's slope is at most 1/4 and these weights are tiny: each layer shrinks
    # the gradient ~100x on its way back, so the first layers learn nothing.
    init = keras.initializers.RandomNormal(stddev=0.01) if deep == "sigmoid" else "he_normal"
    return [keras.layers.Dense(32, activation=deep, kernel_initializer=init) for _ in range(6)]


if __name__ == "__main__":
    main()
