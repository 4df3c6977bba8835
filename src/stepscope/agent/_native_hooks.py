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
from typing import Any

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder, native_module

_SCOPE = "step-hooks"  # the fault scope of every step hook


def optimizer_hooks(
    rec: StepRecorder, faults: FaultBoundary, after_step: Callable[[], None]
) -> tuple[Any, Any] | None:
    """The optimizer's pre and post step hooks, or None without the C module."""
    native = native_module(rec)
    if native is None:
        return None
    record = functools.partial(faults.record, _SCOPE)
    start = functools.partial(faults.call, _SCOPE, rec.on_optimizer_start)
    end = functools.partial(faults.call, _SCOPE, rec.on_optimizer_end)
    pre = native.Hook(native.OPT_PRE, rec, None, start, None, None, None, record)
    post = native.Hook(native.OPT_POST, rec, None, end, after_step, None, None, record)
    return pre, post


def call_hook(
    rec: StepRecorder,
    faults: FaultBoundary,
    inherited: Any,
    roots: tuple[Any, ...],
    grad_enabled: Callable[[], bool],
) -> Any:
    """The timed ``__call__`` of a root module's class, or None without the C module."""
    native = native_module(rec)
    if native is None:
        return None
    start = functools.partial(faults.call, _SCOPE, rec.on_forward_start)
    end = functools.partial(faults.call, _SCOPE, rec.on_forward_end)
    record = functools.partial(faults.record, _SCOPE)
    return native.Hook(native.CALL, rec, inherited, start, end, roots, grad_enabled, record)


def timer_hook(
    rec: StepRecorder, faults: FaultBoundary, kind: str, original: Any, wrapper: Any, extra: Any
) -> Any:
    """The C version of ``wrapper`` (kind ``BACKWARD`` or ``NEXT``), else ``wrapper``.

    ``extra`` is what the C backward reads ``on_backward_root`` from.
    """
    native = native_module(rec)
    if native is None:
        return wrapper
    record = functools.partial(faults.record, _SCOPE)
    return native.Hook(getattr(native, kind), rec, original, wrapper, None, extra, None, record)
