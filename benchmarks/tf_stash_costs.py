"""What the side variables of compiled TensorFlow steps cost a step (issue 23 item 4).

The compiled step of a small Keras MLP (64-256-256-1, batch 64, Adam; the model of
benchmarks/tf_overhead.py), one ``tf.function`` per variant over the same model:

* ``bare``: GradientTape, loss, ``apply``;
* ``loss``: plus the batch loss's scalar assign (what ``fit`` gets at default settings);
* ``grads_off``: plus the gradients' copies under ``tf.cond`` on a flag that is off
  (the steps that do not save, once a collection asks for gradients);
* ``grads_on``: the same with the flag on (a saving step, before reading them).

Interleaved rounds of ``--calls`` calls each (the order rotated every round); per
variant the quartiles, over rounds, of its per-step CPU time (the process's) minus
``bare``'s in the same round. The stash is the agent's
(:class:`~stepscope.agent.frameworks._tf_stash.GraphStash`).

    PYTHONPATH=src python benchmarks/tf_stash_costs.py --rounds 40 --calls 100
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf

from stepscope.agent.frameworks._tf_stash import GraphStash
from stepscope.agent.tensors._collections import resolve
from stepscope.agent.tensors._plans import SavePlanner


def _step(model: Any, opt: Any, extra: Callable[[Any, Any], None]) -> Any:
    loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

    @tf.function
    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        extra(loss, grads)
        opt.apply(grads, model.trainable_variables)
        return loss

    return step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=200)
    a = p.parse_args()
    keras.utils.set_random_seed(0)
    hidden = [keras.layers.Dense(256, "relu") for _ in range(2)]
    model = keras.Sequential([keras.Input((64,)), *hidden, keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(1e-3)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(64, 64)).astype("float32"))
    y = tf.constant((rng.normal(size=(64, 1)) > 0).astype("float32"))
    losses = GraphStash(SavePlanner(resolve({})))
    grads = GraphStash(SavePlanner(resolve({"rules": [{"name": "VanishingGradient"}]})))
    names = [f"gradient/{v.path}" for v in model.trainable_variables]

    def keep_grads(_: Any, g: Any) -> None:
        grads.keep_gradients(list(zip(names, g, strict=True)))

    variants = {
        "bare": _step(model, opt, lambda loss, g: None),
        "loss": _step(model, opt, lambda loss, g: losses.keep_loss("train", loss)),
        "grads": _step(model, opt, keep_grads),
    }
    for fn in variants.values():
        fn(x, y)  # trace
    order = ["bare", "loss", "grads_off", "grads_on"]
    times: dict[str, list[float]] = {k: [] for k in order}
    for r in range(a.rounds):
        for name in order[r % 4 :] + order[: r % 4]:  # rotated: no variant always last
            fn = variants[name.split("_")[0]]
            grads.arm(name == "grads_on")
            t0 = time.process_time()  # CPU time: less sensitive to a loaded machine
            for _ in range(a.calls):
                fn(x, y)
            times[name].append((time.process_time() - t0) / a.calls * 1e6)
    out: dict[str, object] = {"bare_us": round(statistics.median(times["bare"]), 1)}
    for k in order[1:]:  # paired with the same round's bare: quartiles of the differences
        diffs = [v - b for v, b in zip(times[k], times["bare"], strict=True)]
        out[f"{k}_minus_bare_us"] = [round(q, 1) for q in statistics.quantiles(diffs, n=4)]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
