"""The Keras 3 part of the TensorFlow hooks (:class:`._tf_hooks.TFHooks` mixes it in).

Keras' step functions (``make_train_function`` and its test and predict twins of
the trainer of the backend that runs, the function each sets wrapped in turn), the
outermost eager ``Model.__call__``, the epochs of ``CallbackList`` and
``Mean.update_state`` (a step's ``loss`` tracker: the batch's loss,
:mod:`._tf_stash`); the optimizers' ``apply`` is wrapped by ``TFHooks._wrap_apply``
(on JAX and PyTorch through :mod:`._keras_split`). See :mod:`._tf_hooks` for what
each is as a step.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder
from stepscope.agent.frameworks._keras_split import KerasSplitHooks, trainer_class

if TYPE_CHECKING:
    from stepscope.agent.frameworks._tf_capture import TFCapture

Fn = Callable[..., object]
Patches = list[tuple[type, str, object]]  # (owner, name, what it had)
_SCOPE = "step-hooks"
_INHERITED = object()


class KerasHooks(KerasSplitHooks):
    """Keras' hooks; the state they share lives on :class:`TFHooks`."""

    # Set by TFHooks.__init__ (declared here for the type checker only).
    rec: StepRecorder
    faults: FaultBoundary
    capture: TFCapture | None
    event: Callable[..., None]
    keras: bool
    _patches: Patches
    _keras_patches: Patches
    _keras_depth: int
    _keras_kind: str  # the Keras step function being called: train, test, predict
    _model_depth: int
    _eager: Callable[[], bool]
    _recording: Callable[[], bool]
    _training: Callable[[], bool]  # a forward called without ``training=`` trains
    _symbolic: Callable[[], bool]  # Keras on torch: inside a SymbolicScope

    def _patch(
        self, owner: type, name: str, wrap: Callable[[Fn], Fn], into: Patches | None = None
    ) -> None:
        original = owner.__dict__.get(name, _INHERITED)
        (self._patches if into is None else into).append((owner, name, original))
        setattr(owner, name, wrap(getattr(owner, name)))

    def install_keras(self) -> None:
        """Keras 3: its trainer's step functions (on the backend that runs, whose trainer
        alone is imported), its optimizers, model calls and epochs."""
        if self.keras:
            return
        from keras.src.backend import config
        from keras.src.optimizers import base_optimizer

        self.backend = str(config.backend())
        split = self.backend == "torch"  # eager steps: their parts are timed inside
        wrap_apply = {"torch": self._wrap_apply_split, "jax": self._wrap_apply_jax}.get(
            self.backend, self._wrap_apply
        )
        into = self._keras_patches
        self._patch(base_optimizer.BaseOptimizer, "apply", wrap_apply, into)
        try:
            from keras.src.optimizers import loss_scale_optimizer as lso

            self._patch(lso.LossScaleOptimizer, "apply", wrap_apply, into)
        except (ImportError, AttributeError):
            pass  # an older Keras 3: no loss-scale optimizer of its own
        trainer = trainer_class(self.backend)
        if trainer is None:
            self.keras = True  # another backend (numpy, openvino): its optimizer only
            return
        self._training = lambda: self._recording()  # a GradientTape records (TensorFlow)
        if split:
            import torch
            from keras.src.backend.common.symbolic_scope import in_symbolic_scope

            self._training, self._symbolic = torch.is_grad_enabled, in_symbolic_scope
        for kind in ("train", "test", "predict"):
            self._patch(trainer, f"make_{kind}_function", self._wrap_make(kind), into)
        from keras.src.callbacks.callback_list import CallbackList
        from keras.src.models.model import Model

        if self.backend != "jax":  # eager forwards; JAX's custom loops are jitted
            self._patch(Model, "__call__", self._wrap_model_call, into)
        if self.backend == "tensorflow":  # the batch loss is kept in TensorFlow's terms
            from keras.src.metrics.reduction_metrics import Mean

            self._patch(Mean, "update_state", self._wrap_update_state, into)
        for edge in ("begin", "end"):
            self._patch(CallbackList, f"on_epoch_{edge}", self._wrap_epoch(edge), into)
        self.keras = True

    def remove_keras(self) -> None:
        restore(self._keras_patches)
        self.keras = False

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
        if self.backend == "torch":
            return self._split_step_function(kind, fn, model)
        rec, faults, training = self.rec, self.faults, kind == "train"
        jax = self.backend == "jax"

        def step_function(*args: object, **kwargs: object) -> object:
            try:
                rec.on_forward_start(perf_counter())
            except Exception as exc:
                faults.record(_SCOPE, exc)
            self._keras_depth += 1
            outer, self._keras_kind = self._keras_kind, kind
            try:
                out = fn(*args, **kwargs)
            finally:
                self._keras_depth -= 1
                self._keras_kind = outer
            t = perf_counter()
            try:
                capture = self.capture
                if capture is not None and (capture.armed if training else capture.armed_eval):
                    if jax:  # (logs, state): the weights are in the state, not the model
                        capture.on_logs(training, out[0] if isinstance(out, tuple) else out, None)
                    else:
                        capture.on_logs(training, out, model)
                rec.on_forward_end(t, training)
                if training:
                    rec.end_train_step(t)
            except Exception as exc:
                faults.record(_SCOPE, exc)
            return out

        step_function._stepscope = True  # type: ignore[attr-defined]  # wrapped once
        return step_function

    def _wrap_update_state(self, update: Fn) -> Fn:
        """A Keras step's ``loss`` tracker: the batch's loss goes to the capture (traced:
        a side variable the step writes), since the logs' ``loss`` is the epoch's mean."""

        def update_state(metric: object, values: object, *args: object, **kw: object) -> object:
            if self._keras_kind and getattr(metric, "name", None) == "loss":
                try:
                    if self.capture is not None and self._keras_kind != "predict":
                        self.capture.stash.keep_loss(self._keras_kind, values)
                except Exception as exc:
                    self.faults.record(_SCOPE, exc)
            return update(metric, values, *args, **kw)

        return update_state

    # -- eager forwards and epochs ---------------------------------------------------------
    def _wrap_model_call(self, call: Fn) -> Fn:
        rec, eager, faults = self.rec, self._eager, self.faults
        split = self.backend == "torch"  # Keras' torch steps: the forward is timed here

        def __call__(model: object, *args: object, **kwargs: object) -> object:
            if (
                self._model_depth
                or (self._keras_depth and not split)
                or not eager()
                or (split and self._symbolic())  # Keras builds the model on fake inputs
            ):
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
                try:  # in Keras' own step, its step function says which phase it is
                    flag = kwargs.get("training")
                    training = bool(flag) or (flag is None and self._training())
                    rec.on_forward_end(t, training or self._keras_depth > 0)
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


def restore(patches: Patches) -> None:
    """Put back what ``patches`` replaced, last first; empties the list."""
    for owner, name, original in reversed(patches):
        if original is _INHERITED:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
    patches.clear()
