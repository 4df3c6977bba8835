"""A small Keras 3 MLP trained under ``tf.distribute.MultiWorkerMirroredStrategy``.

A custom loop (``strategy.run`` in a ``tf.function``): Keras 3's ``Model.fit`` does not
run under this strategy (keras-team/keras#20585).

Each worker is its own process with its own ``TF_CONFIG`` (the cluster and this
worker's task), unchanged for stepscope. Planted problems for the tests:
``--slow-rank R --slow S`` makes worker R sleep S seconds after every step (Python
between steps: its peers wait for it inside their compiled step);
``--slow-data S`` makes worker R's input pipeline sleep S seconds per batch;
``--fail-rank R --fail-at N`` makes worker R raise after step N.
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
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=32, help="global batch size")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow", type=float, default=0.0)
    p.add_argument("--slow-data", type=float, default=0.0)
    p.add_argument("--fail-rank", type=int, default=-1)
    p.add_argument("--fail-at", type=int, default=-1)
    p.add_argument("--save", default="", help="final weights to SAVE-<worker>.npz")
    a = p.parse_args()

    cfg = json.loads(os.environ["TF_CONFIG"])
    me, workers = cfg["task"]["index"], len(cfg["cluster"]["worker"])
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    keras.utils.set_random_seed(0)
    n = a.steps * a.batch
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 32)).astype("float32")
    y = (x[:, :4].sum(axis=1, keepdims=True) > 0).astype("float32")
    # Each worker's own shard, iterated from Python: the agent times its `next` (data_wait).
    local = tf.data.Dataset.from_tensor_slices((x, y)).shard(workers, me)
    local = local.batch(a.batch // workers)
    if me == a.slow_rank and a.slow_data > 0:

        def slow(xb: tf.Tensor, yb: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            tf.py_function(lambda: time.sleep(a.slow_data), [], [])
            return xb, yb

        local = local.map(slow)
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input((32,)),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(1),
            ]
        )
        optimizer = keras.optimizers.Adam()

    def replica_step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            per_example = tf.square(model(xb, training=True) - yb)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=a.batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        losses = strategy.run(replica_step, args=(xb, yb))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    for i, (xb, yb) in enumerate(local):
        train_step(xb, yb)
        if me == a.slow_rank:
            time.sleep(a.slow)  # Python between steps: the peers wait in their next step
        if me == a.fail_rank and i == a.fail_at:
            raise RuntimeError(f"planted failure after step {i}")
    if a.save:
        np.savez(f"{a.save}-{me}.npz", *[v.numpy() for v in model.trainable_variables])
    print(f"worker {me} done", flush=True)


if __name__ == "__main__":
    main()
