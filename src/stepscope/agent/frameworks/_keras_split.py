"""Keras 3's backends, and its steps on the PyTorch backend, where they can be split.

Keras' ``fit`` loop is the same on every backend: a trainer class
(``TensorFlowTrainer``, ``JAXTrainer``, ``TorchTrainer``) sets a step function per
batch (``make_train_function`` and its twins), which the Keras hooks wrap. On
TensorFlow and JAX that function is compiled (``tf.function``, ``jax.jit``): its
whole time is the step's ``forward``. On PyTorch it runs eagerly, so its parts are
timed where they run: the outermost Keras ``Model.__call__`` (``forward``), torch's
``backward()`` (the torch adapter's timer), the Keras optimizer's ``apply``
(``optimizer``), and the ``next`` of the torch DataLoader Keras iterates
(``data_wait``, the torch adapter's). The step function's end ends the step
(docs/tensorflow.md, "Keras on JAX and PyTorch").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder
from stepscope.agent.frameworks._tf_values import var_name

if TYPE_CHECKING:
    from stepscope.agent.frameworks._tf_capture import TFCapture
    from stepscope.agent.frameworks._torch_timers import StepTimers

Fn = Callable[..., object]
_SCOPE = "step-hooks"
_TRAINERS = {
    "tensorflow": ("keras.src.backend.tensorflow.trainer", "TensorFlowTrainer"),
    "jax": ("keras.src.backend.jax.trainer", "JAXTrainer"),
    "torch": ("keras.src.backend.torch.trainer", "TorchTrainer"),
}


def trainer_class(backend: str) -> type | None:
    """The trainer of Keras' ``backend``: only that one is imported (importing
    TensorFlow's on the PyTorch backend would cost the job TensorFlow's import)."""
    where = _TRAINERS.get(backend)
    if where is None:
        return None
    try:
        cls = getattr(importlib.import_module(where[0]), where[1])
    except (ImportError, AttributeError):
        return None
    return cls if isinstance(cls, type) else None


class KerasSplitHooks:
    """The step function and optimizer wrappers of Keras on its PyTorch backend."""

    rec: StepRecorder
    faults: FaultBoundary
    capture: TFCapture | None
    backend: str = ""  # Keras' backend, once installed ("tensorflow", "jax", "torch")
    # The torch adapter's timers, once Keras on torch shares them: its backward hook's
    # loss capture stands back inside Keras' steps (the loss comes from Keras' logs).
    torch_timers: StepTimers | None = None
    _keras_depth: int
    _opt_depth: int
    _wrap_apply: Callable[[Fn], Fn]

    def _split_step_function(self, kind: str, fn: Fn, model: object) -> Fn:
        rec, faults, training = self.rec, self.faults, kind == "train"

        def step_function(*args: object, **kwargs: object) -> object:
            timers, on_root = self.torch_timers, None
            if timers is not None:
                on_root, timers.on_backward_root = timers.on_backward_root, None
            self._keras_depth += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                self._keras_depth -= 1
                if timers is not None:
                    timers.on_backward_root = on_root
            t = perf_counter()
            try:
                capture = self.capture
                if capture is not None and (capture.armed if training else capture.armed_eval):
                    capture.on_logs(training, out, model)
                if training:
                    rec.end_train_step(t)
                else:  # its forward was timed by Model.__call__: an empty one ends it
                    rec.on_forward_start(t)
                    rec.on_forward_end(t, False)
            except Exception as exc:
                faults.record(_SCOPE, exc)
            return out

        step_function._stepscope = True  # type: ignore[attr-defined]  # wrapped once
        return step_function

    def _wrap_apply_split(self, apply: Fn) -> Fn:
        """Inside Keras' torch step: the update's time (the step function ends the step);
        outside (a custom loop): as on TensorFlow, ``apply`` ends the step."""
        custom = self._wrap_apply(apply)
        rec, faults = self.rec, self.faults

        def wrapped(opt: object, *args: object, **kwargs: object) -> object:
            if not self._keras_depth:
                return custom(opt, *args, **kwargs)
            self._opt_depth += 1  # a LossScaleOptimizer's inner apply: counted once
            if self._opt_depth == 1 and self.capture is not None and self.capture.armed:
                self._gradients(opt, args, kwargs)
            t0 = perf_counter()
            try:
                return apply(opt, *args, **kwargs)
            finally:
                self._opt_depth -= 1
                if not self._opt_depth:
                    try:
                        rec.on_optimizer_part(t0, perf_counter())
                    except Exception as exc:
                        faults.record(_SCOPE, exc)

        return wrapped

    def _gradients(self, opt: object, args: tuple[object, ...], kw: dict[str, object]) -> None:
        """The gradients ``apply(grads, trainable_variables=None)`` gets, in a saving step
        (the weights are taken from the step function's end, after the update)."""
        try:
            capture, step = self.capture, self.rec.train_steps
            plan = capture.planner.plan("train", step) if capture is not None else ()
            if capture is None or not any("gradient" in c.kinds for c in plan):
                return
            given = args[1] if len(args) > 1 else kw.get("trainable_variables")
            variables = given if given is not None else getattr(opt, "_trainable_variables", ())
            grads = args[0] if args else kw.get("grads", ())
            if isinstance(grads, list | tuple) and isinstance(variables, list | tuple):
                for g, v in zip(grads, variables, strict=False):
                    if g is not None:
                        capture.take(
                            plan, "gradient", ("train", step, f"gradient/{var_name(v)}"), g
                        )
        except Exception as exc:
            self.faults.record("tensors", exc)

    def _wrap_apply_jax(self, apply: Fn) -> Fn:
        """On JAX: an ``apply`` traced by ``jax.jit`` (``stateless_apply`` in a jitted
        custom step) is not a step, it runs once per compilation; an eager one is."""
        custom = self._wrap_apply(apply)
        tracing = _jax_tracing()

        def wrapped(opt: object, *args: object, **kwargs: object) -> object:
            if self._keras_depth or tracing():
                return apply(opt, *args, **kwargs)
            return custom(opt, *args, **kwargs)

        return wrapped


def _jax_tracing() -> Callable[[], bool]:
    """True while JAX traces (``jax.jit``, ``grad``); JAX has no public test for it."""
    try:
        from jax._src.core import trace_state_clean
    except ImportError:
        return lambda: True  # unknown: an apply is never taken for a step
    return lambda: not trace_state_clean()
