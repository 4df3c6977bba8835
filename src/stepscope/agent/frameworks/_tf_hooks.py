"""The hooks that let the agent see steps of a TensorFlow 2.x / Keras 3 script, unchanged.

* Keras ``fit``/``evaluate``/``predict``: ``TensorFlowTrainer.make_train_function``
  (and its test and predict twins) are wrapped; the function each returns, called
  once per batch by Keras' loop, is wrapped in turn. A train call is one training
  step, a test or predict call one evaluation step. Inside a compiled function
  (``tf.function``, XLA) the forward, the gradients, the update and the input
  pipeline's ``next`` run fused: its whole time is the step's ``forward``
  (docs/tensorflow.md). With ``steps_per_execution=N`` one call is one step.
* custom loops: ``apply`` of Keras optimizers (``apply_gradients`` calls it;
  a ``LossScaleOptimizer`` calls its inner optimizer's: counted once by depth).
  Called eagerly, it is the step's ``optimizer`` part and ends the step. Called
  while a ``tf.function`` is traced, it marks the outermost function being
  called as a train function: each later call of it is one training step, its
  time the step's ``forward`` (``tf.function``'s ``__call__`` is wrapped). Traced
  (a custom loop's or Keras'), its gradients go to the capture's side variables
  when a collection wants them (:mod:`._tf_stash`).
* eager parts of custom loops: the outermost Keras ``Model.__call__``
  (``forward``; called with ``training=False``, or outside any ``GradientTape``, it
  is an evaluation step, as a torch forward outside training is),
  ``GradientTape.gradient`` (``backward``) and ``next`` of a ``tf.data`` iterator
  driven from Python (``data_wait``).
* epochs: Keras' ``CallbackList.on_epoch_begin``/``_end`` write ``epoch_start`` and
  ``epoch_end`` events.

Every callback runs behind the fault boundary: a bug here never reaches training.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder
from stepscope.agent.frameworks._keras_hooks import KerasHooks, Patches, restore
from stepscope.agent.frameworks._tf_values import var_name

if TYPE_CHECKING:
    from stepscope.agent.frameworks._tf_capture import TFCapture

Fn = Callable[..., object]
_SCOPE = "step-hooks"


class TFHooks(KerasHooks):
    """Installs and removes every TensorFlow/Keras hook."""

    def __init__(self, rec: StepRecorder, faults: FaultBoundary) -> None:
        self.rec, self.faults = rec, faults
        self._patches: Patches = []  # TensorFlow's attributes we replaced
        self._keras_patches: Patches = []  # Keras'
        self.train_fns: set[int] = set()  # ids of tf.functions whose trace applied gradients
        self._calls: list[object] = []  # tf.functions being called (outermost first)
        self._keras_depth = 0  # inside a Keras step function: the other hooks stand back
        self._keras_kind = ""  # which one (train, test, predict)
        self._opt_depth = 0
        self._inner_depth = 0  # inside an apply of a Keras step or a trace
        self._model_depth = 0
        self._eager: Callable[[], bool] = lambda: True
        self._recording: Callable[[], bool] = lambda: True  # a GradientTape is active
        self.event: Callable[..., None] = lambda kind, **detail: None
        self.capture: TFCapture | None = None
        self.keras = False
        self.installed = False

    # -- install / remove -------------------------------------------------------------
    def install(self) -> None:
        """The TensorFlow hooks; Keras' once ``keras`` is imported (``install_keras``)."""
        from tensorflow.python.data.ops import iterator_ops
        from tensorflow.python.eager import backprop, context, record
        from tensorflow.python.eager.polymorphic_function import polymorphic_function

        self._eager = context.executing_eagerly
        self._recording = record.could_possibly_record
        self._patch(polymorphic_function.Function, "__call__", self._wrap_function_call)
        self._patch(iterator_ops.OwnedIterator, "__next__", self._wrap_next)
        self._patch(backprop.GradientTape, "gradient", self._wrap_gradient)
        self.installed = True

    def remove(self) -> None:
        restore(self._patches)
        self.installed = False

    # -- custom loops: optimizers and tf.functions --------------------------------------
    def _wrap_apply(self, apply: Fn) -> Fn:
        def wrapped(opt: object, grads: object, *args: object, **kwargs: object) -> object:
            if self._keras_depth or not self._eager():  # Keras' own step, or traced
                if self._inner_depth:
                    return apply(opt, grads, *args, **kwargs)
                self._apply_inside(opt, grads, _variables(opt, args, kwargs))
                self._inner_depth = 1
                try:
                    return apply(opt, grads, *args, **kwargs)
                finally:
                    self._inner_depth = 0
            self._opt_depth += 1
            if self._opt_depth == 1:
                self._opt_start(opt, grads, args, kwargs)
            try:
                return apply(opt, grads, *args, **kwargs)
            finally:
                self._opt_depth -= 1
                if not self._opt_depth:
                    self._opt_end()

        return wrapped

    def _apply_inside(self, opt: object, grads: object, variables: object) -> None:
        """The outermost ``apply`` of a Keras step or of a trace: a custom loop's traced
        step marks its train function; the gradients go to the capture (traced: into
        side variables the step writes, docs/tensorflow.md)."""
        try:
            traced = not self._eager()
            if traced and not self._keras_depth and self._calls:
                self.train_fns.add(id(self._calls[0]))
                if self.capture is not None and isinstance(variables, list | tuple):
                    self.capture.variables = list(variables)
            capture = self.capture
            if capture is None or not isinstance(grads, list | tuple):
                return
            if not isinstance(variables, list | tuple):
                return
            if traced:
                pairs = zip(grads, variables, strict=False)
                capture.stash.keep_gradients([(f"gradient/{var_name(v)}", g) for g, v in pairs])
            elif capture.armed:  # Keras' step run eagerly
                capture.on_gradients(grads, variables)
        except Exception as exc:
            self.faults.record(_SCOPE, exc)

    def _opt_start(
        self, opt: object, grads: object, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        try:
            self.rec.on_optimizer_start(perf_counter())
            if self.capture is not None and self.capture.armed:
                self.capture.on_apply(grads, _variables(opt, args, kwargs))
        except Exception as exc:
            self.faults.record(_SCOPE, exc)

    def _opt_end(self) -> None:
        try:
            self.rec.on_optimizer_end(perf_counter())
        except Exception as exc:
            self.faults.record(_SCOPE, exc)

    def _wrap_function_call(self, call: Fn) -> Fn:
        calls, train_fns = self._calls, self.train_fns

        def __call__(fn: object, *args: object, **kwargs: object) -> object:
            if calls or self._keras_depth:  # nested, or Keras' own step: not ours
                calls.append(fn)
                try:
                    return call(fn, *args, **kwargs)
                finally:
                    calls.pop()
            calls.append(fn)
            t0 = perf_counter()
            try:
                out = call(fn, *args, **kwargs)
            finally:
                calls.pop()
            if id(fn) in train_fns:
                self._compiled_step(t0, perf_counter(), out)
            return out

        return __call__

    def _compiled_step(self, t0: float, t1: float, out: object) -> None:
        try:
            self.rec.on_forward_start(t0)
            self.rec.on_forward_end(t1, True)
            if self.capture is not None and self.capture.armed:
                self.capture.on_function_output(out)
            self.rec.end_train_step(t1)
        except Exception as exc:
            self.faults.record(_SCOPE, exc)

    # -- eager parts ----------------------------------------------------------------------
    def _wrap_next(self, nxt: Fn) -> Fn:
        rec, eager = self.rec, self._eager

        def __next__(it: object) -> object:
            if not eager():
                return nxt(it)  # traced inside a tf.function: the step's compiled part
            t0 = perf_counter()
            out = nxt(it)  # StopIteration passes through untimed, as torch's loader's
            try:
                rec.on_data(t0, perf_counter())
            except Exception as exc:
                self.faults.record(_SCOPE, exc)
            return out

        return __next__

    def _wrap_gradient(self, gradient: Fn) -> Fn:
        rec, eager = self.rec, self._eager

        def wrapped(tape: object, target: object, *args: object, **kwargs: object) -> object:
            if not eager() or self._keras_depth:
                return gradient(tape, target, *args, **kwargs)
            try:
                rec.on_backward_start()
                if self.capture is not None and self.capture.armed:
                    self.capture.on_loss(target)
            except Exception as exc:
                self.faults.record(_SCOPE, exc)
            t0 = perf_counter()
            out = gradient(tape, target, *args, **kwargs)
            try:
                rec.on_backward(t0, perf_counter())
            except Exception as exc:
                self.faults.record(_SCOPE, exc)
            return out

        return wrapped


def _variables(opt: object, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    """The variables an ``apply(grads, trainable_variables=None)`` call updates."""
    given = args[0] if args else kwargs.get("trainable_variables")
    return given if given is not None else getattr(opt, "_trainable_variables", None)
