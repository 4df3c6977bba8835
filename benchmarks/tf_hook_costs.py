"""CPU cost per step of the TensorFlow/Keras hooks' own Python (issue 23), without TensorFlow.

The hooks wrap callables that do nothing; each figure is the best of 7 repeats of
200 000 calls, minus the same call unwrapped. What a step pays on top of its work:

* a compiled custom loop: the ``tf.function`` call wrapper (a marked train
  function: forward, step end) and ``next`` of the iterator (data wait);
* ``fit``: Keras' train function wrapper around its ``tf.function``.

    PYTHONPATH=src python benchmarks/tf_hook_costs.py
"""

from __future__ import annotations

import json
import timeit
from collections import deque

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import new_recorder
from stepscope.agent.frameworks._tf_hooks import TFHooks

N = 200_000


class Fn:
    """Stands for a ``tf.function``."""


def _best_us(fn: object, *args: object) -> float:
    call = fn  # a callable
    runs = timeit.repeat(lambda: call(*args), number=N, repeat=7)  # type: ignore[operator]
    return min(runs) / N * 1e6


def main() -> None:
    hooks = TFHooks(new_recorder(deque(maxlen=10)), FaultBoundary(None, {}))
    hooks._eager = lambda: True
    marked, inner_fn = Fn(), Fn()
    hooks.train_fns.add(id(marked))

    def noop(*_: object) -> None:
        return None

    call = hooks._wrap_function_call(noop)
    nxt = hooks._wrap_next(noop)
    inner = hooks._wrap_function_call(noop)
    keras_step = hooks._step_function("train", lambda *_: inner(inner_fn, 1), None)
    bare = _best_us(noop, marked, 1)
    loop = _best_us(call, marked, 1) - bare + _best_us(nxt, marked) - _best_us(noop, marked)
    fit = _best_us(keras_step, 1) - bare
    print(json.dumps({"compiled_loop_step_us": round(loop, 3), "fit_step_us": round(fit, 3)}))


if __name__ == "__main__":
    main()
