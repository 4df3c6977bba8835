"""An executor for object stores' clients in ``atexit`` handlers (``Store.ready_for_exit``);
apart, so that a local store's processes never import ``concurrent.futures``."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")


class InlineExecutor(ThreadPoolExecutor):
    """Runs each call at once in the caller's thread: works after Python's exit began."""

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        done: Future[_T] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            done.set_exception(exc)
        return done
