"""The wrappers that time ``backward()`` and the data wait, on every step.

They run on the training thread at every step, so they are as cheap as Python
allows (docs/design.md): ``torch.autograd.backward`` is wrapped with torch's own
signature and its arguments passed on by position (``**kwargs`` would build a
dict per call: ~5,000 instructions a step, counted by
benchmarks/step_instructions.py), and each wrapper makes one recorder call.
Where the C fast path is built (agent/_native.c), a C wrapper times the common
case and calls these for the rest.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Literal

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._native_hooks import Wrapped, timer_hook
from stepscope.agent._recorder import StepRecorder

if TYPE_CHECKING:
    from torch.utils.data.dataloader import _BaseDataLoaderIter

# torch.autograd.backward's parameters and defaults since torch 2.0
BACKWARD_SIGNATURE = (
    ("tensors", inspect.Parameter.empty),
    ("grad_tensors", None),
    ("retain_graph", None),
    ("create_graph", False),
    ("grad_variables", None),
    ("inputs", None),
)


def signature(fn: Callable[..., object]) -> tuple[tuple[str, object], ...]:
    """``fn``'s parameters as (name, default) pairs; ``()`` if it has none to show."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple((p.name, p.default) for p in params)


class StepTimers:
    """Makes the ``backward()`` and ``__next__`` wrappers that feed the recorder."""

    def __init__(self, rec: StepRecorder, faults: FaultBoundary) -> None:
        self.rec, self.faults = rec, faults
        # Called with the first argument of every ``torch.autograd.backward`` (the
        # loss, for tensor capture); set by the agent's TensorCapture.
        self.on_backward_root: Callable[[object], None] | None = None

    def _native(
        self, kind: Literal["BACKWARD", "NEXT"], original: Wrapped, wrapper: Wrapped
    ) -> Wrapped:
        """The C version of ``wrapper`` (agent/_native.c) on a native recorder."""
        extra = self if kind == "BACKWARD" else None  # it reads on_backward_root
        return timer_hook(self.rec, self.faults, kind, original, wrapper, extra)

    def wrap_backward(self, original: Wrapped) -> Wrapped:
        """``torch.autograd.backward``, timed."""
        return self._native("BACKWARD", original, self._wrap_backward_py(original))

    def _wrap_backward_py(self, original: Wrapped) -> Wrapped:
        if signature(original) != BACKWARD_SIGNATURE:  # another torch: pass all through
            return self._wrap_backward_any(original)
        rec, faults, starts = self.rec, self.faults, self._backward_starts

        # The arguments are torch's to check: they are passed on as they came.
        def backward(
            tensors: object,
            grad_tensors: object = None,
            retain_graph: bool | None = None,
            create_graph: bool = False,
            grad_variables: object = None,
            inputs: object = None,
        ) -> object:
            if self.on_backward_root is not None or rec.device is not None:
                starts(tensors)
            t0 = perf_counter()
            try:
                return original(
                    tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs
                )
            finally:
                t1 = perf_counter()
                try:
                    rec.on_backward(t0, t1)
                except Exception as exc:
                    faults.record("step-hooks", exc)

        return backward

    def _wrap_backward_any(self, original: Wrapped) -> Wrapped:
        def backward(*args: object, **kwargs: object) -> object:
            self._backward_starts(args[0] if args else kwargs.get("tensors"))
            t0 = perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.faults.call("step-hooks", self.rec.on_backward, t0, perf_counter())

        return backward

    def _backward_starts(self, tensors: object) -> None:
        if self.on_backward_root is not None:  # guarded by its owner
            self.on_backward_root(tensors)
        try:
            if self.rec.device is not None:
                self.rec.on_backward_start()
        except Exception as exc:
            self.faults.record("step-hooks", exc)

    def wrap_next(self, original: Wrapped) -> Wrapped:
        """``_BaseDataLoaderIter.__next__``, timed: the wait for a batch."""
        return self._native("NEXT", original, self._wrap_next_py(original))

    def _wrap_next_py(self, original: Wrapped) -> Wrapped:
        rec, faults = self.rec, self.faults

        def __next__(it: _BaseDataLoaderIter) -> object:
            t0 = perf_counter()
            try:
                return original(it)
            finally:
                t1 = perf_counter()
                try:
                    rec.on_data(t0, t1)
                except Exception as exc:
                    faults.record("step-hooks", exc)

        return __next__
