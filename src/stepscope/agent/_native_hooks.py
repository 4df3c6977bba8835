"""Builders of the C hooks (agent/_native.c) that stand in for the Python ones.

A C ``Hook`` times the common case of one hook itself and calls the Python code
of ``_hooks.py``/``_timers.py`` (given here as its slow paths) for the rest, so
both stay the one definition of what a hook records. Each builder returns None
where the recorder is not native (no C compiler at install, or
``STEPSCOPE_NATIVE_HOOKS=0``), and the caller keeps its Python hook.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder, native_module

if TYPE_CHECKING:
    from torch import nn
    from torch.optim import Optimizer

    from stepscope.agent._native import Hook, RecorderState

    # torch's global optimizer step hooks (pre and post), as ours are: they return None
    OptimizerHook = Callable[[Optimizer, tuple[object, ...], dict[str, object]], None]

# What the wrappers wrap and what they become: the callables are passed through
# (``*args``, a forward's output) without being looked at.
Wrapped = Callable[..., object]

_SCOPE = "step-hooks"  # the fault scope of every step hook


def _native_state(rec: StepRecorder) -> RecorderState | None:
    """``rec`` as the C state the hooks read, if it keeps its fields in C."""
    if native_module(rec) is None:
        return None
    from stepscope.agent._native import RecorderState

    return rec if isinstance(rec, RecorderState) else None


def optimizer_hooks(
    rec: StepRecorder, faults: FaultBoundary, after_step: Callable[[], None]
) -> tuple[OptimizerHook, OptimizerHook] | None:
    """The optimizer's pre and post step hooks, or None without the C module."""
    state = _native_state(rec)
    if state is None:
        return None
    from stepscope.agent import _native as native

    record = functools.partial(faults.record, _SCOPE)
    start = functools.partial(faults.call, _SCOPE, rec.on_optimizer_start)
    end = functools.partial(faults.call, _SCOPE, rec.on_optimizer_end)
    pre = native.Hook(native.OPT_PRE, state, None, start, None, None, None, record)
    post = native.Hook(native.OPT_POST, state, None, end, after_step, None, None, record)
    return pre, post


def call_hook(
    rec: StepRecorder,
    faults: FaultBoundary,
    inherited: Wrapped,
    roots: tuple[nn.Module, ...],
    grad_enabled: Callable[[], bool],
) -> Hook | None:
    """The timed ``__call__`` of a root module's class, or None without the C module."""
    state = _native_state(rec)
    if state is None:
        return None
    from stepscope.agent import _native as native

    start = functools.partial(faults.call, _SCOPE, rec.on_forward_start)
    end = functools.partial(faults.call, _SCOPE, rec.on_forward_end)
    record = functools.partial(faults.record, _SCOPE)
    return native.Hook(native.CALL, state, inherited, start, end, roots, grad_enabled, record)


def timer_hook(
    rec: StepRecorder,
    faults: FaultBoundary,
    kind: Literal["BACKWARD", "NEXT"],
    original: Wrapped,
    wrapper: Wrapped,
    extra: object,
) -> Wrapped:
    """The C version of ``wrapper`` (kind ``BACKWARD`` or ``NEXT``), else ``wrapper``.

    ``extra`` is what the C backward reads ``on_backward_root`` from.
    """
    state = _native_state(rec)
    if state is None:
        return wrapper
    from stepscope.agent import _native as native

    record = functools.partial(faults.record, _SCOPE)
    code = native.BACKWARD if kind == "BACKWARD" else native.NEXT
    return native.Hook(code, state, original, wrapper, None, extra, None, record)
