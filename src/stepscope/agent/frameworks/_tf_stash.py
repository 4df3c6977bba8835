"""Side variables that carry a compiled step's gradients and batch loss out to Python.

Inside a ``tf.function`` (Keras ``fit``, a compiled custom loop) the gradients and
the batch's loss are graph tensors: they never reach Python. While such a step is
traced, the hooks hand them here and this module adds, beside the training ops:

* gradients, only for the names some collection of the job selects (none by
  default: then nothing is added): one side variable per gradient, written by
  in-graph assigns under ``tf.cond`` on a flag variable that Python sets before a
  saving step and clears after it, so other steps pay one flag read and a branch;
  a stamp counts the writes, so a step whose ``apply`` did not run is not
  mistaken for one that did;
* the loss a Keras step function feeds its ``loss`` tracker (the batch's loss that
  ``logs["loss"]`` averages over the epoch): one scalar assign per step.

The assigns only read tensors the training computes; the training's own ops are
unchanged (tests/test_tf_tensors.py compares weights bit for bit). The variables are
created eagerly (``init_scope``, bypassing ``tf.function``'s variable-creation
checks) and belong to no Keras object: checkpoints do not see them. Values are
read to numpy by the capture (:mod:`._tf_capture`) on saving steps only. Under a
``tf.distribute`` strategy nothing is added (replica contexts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stepscope.agent.tensors._plans import SavePlanner

Wants = Callable[[str, str], bool]


class GraphStash:
    """The side variables of a TF job's compiled steps; one per capture."""

    def __init__(self, planner: SavePlanner) -> None:
        self.planner = planner
        self.grads: dict[str, Any] = {}  # gradient/<path> -> side variable
        self.losses: dict[str, Any] = {}  # step kind -> side variable, or an eager tensor
        self._flag: Any = None  # tf bool variable: write the gradients this step
        self._flag_on = False  # what the flag holds (or will be created with)
        self._stamp: Any = None  # tf int64 variable: gradient writes so far
        self._seen = 0  # the stamp at the last read

    def wants(self, kind: str, name: str) -> bool:
        """Whether some collection ever saves tensor ``name`` of ``kind``."""
        return any(c.selects(kind, name) for c in self.planner.collections)

    def arm(self, on: bool) -> None:
        """Write the gradients in the coming training step (``on``) or not."""
        if on != self._flag_on:
            self._flag_on = on
            if self._flag is not None:
                self._flag.assign(on)

    # -- while traced -------------------------------------------------------------------
    def keep_gradients(self, pairs: list[tuple[str, Any]]) -> None:
        """``(gradient/<path>, gradient)`` of an ``apply`` being traced: the wanted ones
        are copied to side variables on the steps the flag is on."""
        pairs = [(n, g) for n, g in pairs if g is not None and self.wants("gradient", n)]
        if not pairs:
            return  # the default: nothing is added to the graph
        import tensorflow as tf

        if tf.distribute.has_strategy():
            return
        shaped = [(n, g, _shape(tf, g)) for n, g in pairs]
        shaped = [(n, g, s) for n, g, s in shaped if s is not None]
        with tf.init_scope():
            if self._flag is None:
                self._flag = _variable(tf.constant(self._flag_on))
                self._stamp = _variable(tf.constant(0, tf.int64))
            for n, g, shape in shaped:
                slot = self.grads.get(n)
                if slot is None or slot.shape != shape or slot.dtype != g.dtype:
                    self.grads[n] = _variable(tf.zeros(shape, g.dtype))
        slots, stamp = [(self.grads[n], g) for n, g, _ in shaped], self._stamp

        def write() -> None:
            for slot, g in slots:  # an IndexedSlices (embeddings) made dense here only
                slot.assign(tf.convert_to_tensor(g))
            stamp.assign_add(1)

        tf.cond(self._flag, write, lambda: None)

    def keep_loss(self, kind: str, value: Any) -> None:
        """The batch loss of a Keras ``kind`` step (``train``, ``test``), as its ``loss``
        tracker receives it; eagerly, the tensor itself."""
        if not self.wants("loss", "loss"):
            return
        import tensorflow as tf

        if tf.distribute.has_strategy():
            return
        if tf.executing_eagerly():
            self.losses[kind] = value
            return
        value = tf.convert_to_tensor(value)
        if value.shape.rank != 0:
            return  # not a batch's one loss: keep the logs' value
        with tf.init_scope():
            slot = self.losses.get(kind)
            if slot is None or getattr(slot, "dtype", None) != value.dtype or _is_tensor(slot):
                self.losses[kind] = slot = _variable(tf.zeros((), value.dtype))
        slot.assign(value)

    # -- after a step -----------------------------------------------------------------
    def written(self) -> list[tuple[str, Any]]:
        """The gradients the last step wrote (none if it did not write them)."""
        if self._stamp is None:
            return []
        stamp = int(self._stamp.numpy())
        if stamp == self._seen:
            return []
        self._seen = stamp
        return list(self.grads.items())


def _variable(initial: Any) -> Any:
    # ResourceVariable itself, not tf.Variable: tf.function refuses tf.Variables
    # created in a trace other than its first, and ours may come in any trace.
    from tensorflow.python.ops import resource_variable_ops

    return resource_variable_ops.ResourceVariable(initial, trainable=False)


def _shape(tf: Any, g: Any) -> Any:
    """A gradient's static dense shape, or None when the trace does not know it."""
    if isinstance(g, tf.IndexedSlices):
        dims = tf.get_static_value(g.dense_shape)
        shape = tf.TensorShape(None if dims is None else [int(d) for d in dims])
    else:
        shape = tf.TensorShape(getattr(g, "shape", None))
    return shape if shape.is_fully_defined() else None


def _is_tensor(value: object) -> bool:
    return not hasattr(value, "assign")
