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
  time the step's ``forward`` (``tf.function``'s ``__call__`` is wrapped).
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

if TYPE_CHECKING:
    from stepscope.agent.frameworks._tf_capture import TFCapture

Fn = Callable[..., object]
_SCOPE = "step-hooks"
_INHERITED = object()
Patches = list[tuple[type, str, object]]  # (owner, name, what it had)


class TFHooks:
    """Installs and removes every TensorFlow/Keras hook."""

    def __init__(self, rec: StepRecorder, faults: FaultBoundary) -> None:
        self.rec, self.faults = rec, faults
        self._patches: Patches = []  # TensorFlow's attributes we replaced
        self._keras_patches: Patches = []  # Keras'

        self.train_fns: set[int] = set()  # ids of tf.functions whose trace applied gradients
        self._calls: list[object] = []  # tf.functions being called (outermost first)
        self._keras_depth = 0  # inside a Keras step function: the other hooks stand back
        self._opt_depth = 0
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

    def install_keras(self) -> None:
        """Keras 3 (TensorFlow backend): the trainer's step functions and optimizers."""
        if self.keras:
            return
        from keras.src.optimizers import base_optimizer

        into = self._keras_patches
        self._patch(base_optimizer.BaseOptimizer, "apply", self._wrap_apply, into)
        try:
            from keras.src.optimizers import loss_scale_optimizer as lso

            self._patch(lso.LossScaleOptimizer, "apply", self._wrap_apply, into)
        except (ImportError, AttributeError):
            pass  # an older Keras 3: no loss-scale optimizer of its own
        try:
            from keras.src.backend.tensorflow.trainer import TensorFlowTrainer
        except ImportError:
            self.keras = True  # another backend (JAX, torch): see docs/tensorflow.md
            return
        for kind in ("train", "test", "predict"):
            self._patch(TensorFlowTrainer, f"make_{kind}_function", self._wrap_make(kind), into)
        from keras.src.callbacks.callback_list import CallbackList
        from keras.src.models.model import Model

        self._patch(Model, "__call__", self._wrap_model_call, into)
        for edge in ("begin", "end"):
            self._patch(CallbackList, f"on_epoch_{edge}", self._wrap_epoch(edge), into)
        self.keras = True

    def remove(self) -> None:
        _restore(self._patches)
        self.installed = False

    def remove_keras(self) -> None:
        _restore(self._keras_patches)
        self.keras = False

    def _patch(
        self, owner: type, name: str, wrap: Callable[[Fn], Fn], into: Patches | None = None
    ) -> None:
        original = owner.__dict__.get(name, _INHERITED)
        (self._patches if into is None else into).append((owner, name, original))
        setattr(owner, name, wrap(getattr(owner, name)))

    # -- Keras' step functions ----------------------------------------------------------
    def _wrap_make(self, kind: str) -> Callable[[Fn], Fn]:
        def wrap(make: Fn) -> Fn:
            def make_function(model: object, *args: object, **kwargs: object) -> object:
                out = make(model, *args, **kwargs)  # sets model.<kind>_function
                try:
                    fn = getattr(model, f"{kind}_function", None)
                    if fn is not None and not getattr(fn, "_stepscope", False):
                        setattr(model, f"{kind}_function", self._step_function(kind, fn, model))
                except Exception as exc:
                    self.faults.record(_SCOPE, exc)
                return out

            return make_function

        return wrap

    def _step_function(self, kind: str, fn: Fn, model: object) -> Fn:
        rec, faults, training = self.rec, self.faults, kind == "train"

        def step_function(*args: object, **kwargs: object) -> object:
            try:
                rec.on_forward_start(perf_counter())
            except Exception as exc:
                faults.record(_SCOPE, exc)
            self._keras_depth += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                self._keras_depth -= 1
            t = perf_counter()
            try:
                capture = self.capture
                if capture is not None and (capture.armed if training else capture.armed_eval):
                    capture.on_logs(training, out, model)
                rec.on_forward_end(t, training)
                if training:
                    rec.end_train_step(t)
            except Exception as exc:
                faults.record(_SCOPE, exc)
            return out

        step_function._stepscope = True  # type: ignore[attr-defined]  # wrapped once
        return step_function

    # -- custom loops: optimizers and tf.functions --------------------------------------
    def _wrap_apply(self, apply: Fn) -> Fn:
        def wrapped(opt: object, grads: object, *args: object, **kwargs: object) -> object:
            if self._keras_depth:
                return apply(opt, grads, *args, **kwargs)
            if not self._eager():
                self._mark_traced(_variables(opt, args, kwargs))
                return apply(opt, grads, *args, **kwargs)
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

    def _mark_traced(self, variables: object) -> None:
        try:
            if self._calls:
                self.train_fns.add(id(self._calls[0]))
                if self.capture is not None and isinstance(variables, list | tuple):
                    self.capture.variables = list(variables)
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
    def _wrap_model_call(self, call: Fn) -> Fn:
        rec, eager, faults = self.rec, self._eager, self.faults

        def __call__(model: object, *args: object, **kwargs: object) -> object:
            if self._model_depth or self._keras_depth or not eager():
                return call(model, *args, **kwargs)  # nested, Keras' own step, or traced
            self._model_depth = 1
            try:
                rec.on_forward_start(perf_counter())
            except Exception as exc:
                faults.record(_SCOPE, exc)
            try:
                return call(model, *args, **kwargs)
            finally:
                self._model_depth = 0
                t = perf_counter()
                try:
                    flag = kwargs.get("training")
                    rec.on_forward_end(t, bool(flag) or (flag is None and self._recording()))
                except Exception as exc:
                    faults.record(_SCOPE, exc)

        return __call__

    def _wrap_epoch(self, edge: str) -> Callable[[Fn], Fn]:
        kind = "epoch_start" if edge == "begin" else "epoch_end"

        def wrap(hook: Fn) -> Fn:
            def on_epoch(callbacks: object, epoch: int, *args: object, **kw: object) -> object:
                try:
                    self.event(kind, epoch=int(epoch), train_steps=self.rec.train_steps)
                except Exception as exc:
                    self.faults.record(_SCOPE, exc)
                return hook(callbacks, epoch, *args, **kw)

            return on_epoch

        return wrap

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


def _restore(patches: Patches) -> None:
    """Put back what ``patches`` replaced, last first; empties the list."""
    for owner, name, original in reversed(patches):
        if original is _INHERITED:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
    patches.clear()


def _variables(opt: object, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    """The variables an ``apply(grads, trainable_variables=None)`` call updates."""
    given = args[0] if args else kwargs.get("trainable_variables")
    return given if given is not None else getattr(opt, "_trainable_variables", None)
