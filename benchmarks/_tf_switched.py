"""The Keras MLP of benchmarks/_tf_train.py under `stepscope run`, stepscope switched
off and on by blocks (the machinery of benchmarks/_switched.py; BENCHMARKS.md).

Run by benchmarks/tf_overhead.py as ``stepscope run -- python _tf_switched.py ...``:

* ``--mode loop``: a custom loop, a ``tf.function`` step over a ``tf.data`` iterator
  driven from Python, one block ``--steps`` steps of it;
* ``--mode fit``: one block one ``fit(ds, steps_per_epoch=steps)`` call.

Bare blocks switch off ``--parts`` (all by default): ``hooks``, the agent's
TensorFlow and Keras hooks (and the Keras train function's wrapper, which ``fit``
keeps between calls); ``helpers``, the sampler and the rule runner (SIGSTOP);
``writers``, the agent's flushes (skipped while bare). ``--parts`` empty (``--same``)
switches nothing: the A/A noise floor. The training's CPU time is the process's
minus the agent's threads': TensorFlow computes in its own thread pools.
Prints one JSON line (``run_blocks``'s, with the mode, the steps per block and the
load average before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _switched import Hooks, Switch, run_blocks, training_cpu, warm_up
from _tf_train import Training, dataset

from stepscope.agent import bootstrap
from stepscope.agent.frameworks._tensorflow import TensorFlowFramework

Train = Callable[[int], float]  # trains n steps, returns the wall seconds


def loop(tr: Training) -> Train:
    step, it = tr.step_function(), iter(dataset(1000).repeat())

    def train(steps: int) -> float:
        t0 = time.perf_counter()
        for _ in range(steps):
            xb, yb = next(it)
            step(xb, yb)
        return time.perf_counter() - t0

    return train


def fit(tr: Training) -> Train:
    ds = dataset(1000).repeat()
    tr.compile()

    def train(steps: int) -> float:
        t0 = time.perf_counter()
        tr.model.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0)
        return time.perf_counter() - t0

    return train


def tf_hooks(agent: bootstrap.Agent, tr: Training) -> Hooks:
    """Off and on: the agent's TensorFlow and Keras hooks, and the wrapper it put around
    the model's train function (``fit`` made it once and keeps it)."""
    fw = agent.framework("tensorflow")
    assert isinstance(fw, TensorFlowFramework)
    wrapped = tr.model.train_function  # None in a custom loop
    inner = wrapped
    if getattr(wrapped, "_stepscope", False):  # the Keras hook's step_function(fn)
        cells = dict(zip(wrapped.__code__.co_freevars, wrapped.__closure__, strict=True))
        inner = cells["fn"].cell_contents

    def off() -> None:
        fw.hooks.remove_keras()
        fw.hooks.remove()
        tr.model.train_function = inner

    def on() -> None:
        fw.hooks.install()
        fw.hooks.install_keras()
        tr.model.train_function = wrapped

    return off, on


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("fit", "loop"), default="loop")
    p.add_argument("--blocks", type=int, default=60, help="blocks of each side")
    p.add_argument("--block-seconds", type=float, default=1.0)
    p.add_argument("--parts", default=",".join(Switch.PARTS), help="switched off when bare")
    p.add_argument("--same", action="store_true", help="switch nothing (A/A)")
    a = p.parse_args()
    agent = bootstrap.current()
    if agent is None:
        raise SystemExit("run under `stepscope run` (benchmarks/tf_overhead.py does)")
    tr = Training()
    train = (fit if a.mode == "fit" else loop)(tr)
    train(20)  # tracing
    warm_up(lambda: train(200))
    steps = max(int(a.block_seconds / (train(400) / 400)), 20)
    parts = () if a.same else tuple(x for x in a.parts.split(",") if x)
    switch = Switch(agent, held=False, hooks=tf_hooks(agent, tr), parts=parts)
    load0 = os.getloadavg()[0]
    r = run_blocks(switch, lambda: train(steps), a.blocks, False, training_cpu)
    r.update(mode=a.mode, steps=steps, parts=parts, load=[load0, os.getloadavg()[0]])
    r["step_ms"] = r["bare_s"] / (a.blocks * steps) * 1e3
    print(json.dumps(r))


if __name__ == "__main__":
    main()
