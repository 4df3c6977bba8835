"""The hooks' C fast path (agent/_native.c): built here, same rows, faults contained."""

from __future__ import annotations

import contextlib
import shutil
from collections import deque
from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.agent import _recorder
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._native_hooks import optimizer_hooks
from stepscope.agent.bootstrap import settings_from_env
from stepscope.agent.frameworks._torch_hooks import TorchHooks
from stepscope.store import open_store


def _native() -> Any:
    module = pytest.importorskip("stepscope.agent._native")
    return module


def test_the_c_fast_path_is_built_where_a_compiler_is() -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the install falls back to the Python hooks")
    assert _recorder._native_class() is not None
    rec = _recorder.new_recorder(deque())
    assert _recorder.native_module(rec) is not None
    assert _recorder.native_module(_recorder.new_recorder(deque(), native=False)) is None


def _drive(rec: _recorder.StepRecorder) -> list[tuple[Any, ...]]:
    """One data wait, forward, backward and optimizer step through the recorder's methods."""
    rec.on_data(1.0, 1.25)
    rec.on_forward_start(1.5)
    rec.on_forward_end(2.0, True)
    rec.on_backward(2.0, 2.75)
    rec.on_optimizer_start(3.0)
    rec.on_optimizer_end(4.0)
    rec.on_forward_start(4.5)
    rec.on_forward_end(5.0, False)  # an evaluation step
    return list(rec.rows)


def test_native_recorder_state_behaves_as_the_python_one() -> None:
    native, python = _recorder.new_recorder(deque()), _recorder.StepRecorder(deque())
    rows = _drive(native)
    assert rows == _drive(python)
    assert rows[0] == ("train", 0, 1.0, 4.0, 0.25, 0.5, 0.75, 1.0, 0.0, 0.0, False, None)
    for rec in (native, python):
        assert (rec.train_steps, rec.eval_steps, rec.boundary) == (1, 1, 5.0)
        rec.boundary = None
        assert rec.boundary is None
    with pytest.raises(TypeError):
        native.profiled = 1  # type: ignore[assignment]  # bools only, as Python sets it


@pytest.mark.parametrize("native", [True, False])
def test_listeners_are_called_when_due_from_either_emit(native: bool) -> None:
    rec = _recorder.new_recorder(deque(), native)
    calls: list[int] = []

    def listener(phase: str, step: int, t: float) -> tuple[int, int]:
        calls.append(step)
        return (3, _recorder.NEVER[1]) if step < 2 else _recorder.NEVER

    rec.listen(listener)
    for i in range(6):
        rec.on_optimizer_start(float(i))
        rec.on_optimizer_end(i + 0.5)
        if i == 4:
            rec.poke = True  # e.g. a live profiling request, from another thread
    assert calls == [0, 2, 5]  # poked at listen(), due from step 2, poked at step 5


def _hooks(rec: Any, faults: FaultBoundary) -> tuple[Any, Any]:
    _native()
    hooks = optimizer_hooks(rec, faults, lambda: None)
    assert hooks is not None
    return hooks


class _BrokenRows:
    def append(self, row: object) -> None:
        raise OSError("rows unwritable")


def test_a_failure_inside_the_c_path_is_a_recorded_fault_not_an_exception() -> None:
    store = open_store("memory://native-fault")
    faults = FaultBoundary(store, {"rank": 0})
    rec = _recorder.new_recorder(_BrokenRows())  # type: ignore[arg-type]
    rec.boundary = 0.0
    pre, post = _hooks(rec, faults)
    for _ in range(3):
        assert pre(object(), (), {}) is None
        assert post(object(), (), {}) is None  # the row could not be stored: no raise
    assert rec.train_steps == 3 and rec._opt_depth == 0  # the steps still count
    fault = faults.log.records["step-hooks"]
    assert fault["count"] == 3 and "OSError: rows unwritable" in str(fault["error"])
    assert store.exists("faults/step-hooks-node-0.json")  # recorded in the job


def test_a_wrapped_method_binds_and_passes_exceptions_through() -> None:
    native = _native()
    rec = _recorder.new_recorder(deque())
    rec.boundary = 0.0
    slow_calls: list[object] = []

    class It:
        def __init__(self) -> None:
            self.left = 2

        def __next__(self) -> int:
            if not self.left:
                raise StopIteration
            self.left -= 1
            return self.left

        def __iter__(self) -> It:
            return self

    original = It.__next__

    def slow(it: It) -> int:
        slow_calls.append(it)
        return original(it)

    It.__next__ = native.Hook(native.NEXT, rec, original, slow)  # type: ignore[method-assign]
    it = It()
    assert it.__next__() == 1  # bound like a function
    assert list(it) == [0]  # iteration, then StopIteration from inside the C call
    assert rec.data > 0.0 and not slow_calls  # the fast path timed all three calls
    assert It.__next__.__name__ == "__next__"  # the wrapped function's attributes
    rec.on_batch = lambda t0, t1: None  # a data-loader window: the Python wrapper runs
    with pytest.raises(StopIteration):
        next(_exhausted(It))
    assert slow_calls


def _exhausted(cls: type) -> Any:
    it = cls()
    it.left = 0
    return it


def test_hook_arguments_are_checked() -> None:
    native = _native()
    rec = _recorder.new_recorder(deque())
    with pytest.raises(ValueError, match="do not fit its kind"):
        native.Hook(native.CALL, rec, print, print, print, ["not a tuple"], print)
    with pytest.raises(TypeError):
        native.Hook(native.NEXT, object(), print, print)  # not a recorder state


def test_the_env_switch_turns_the_c_path_off() -> None:
    env = {"STEPSCOPE_AGENT": '{"job_url": "memory://x", "node": "n"}'}
    settings = settings_from_env(env)
    assert settings is not None and settings.native_hooks
    settings = settings_from_env({**env, "STEPSCOPE_NATIVE_HOOKS": "0"})
    assert settings is not None and not settings.native_hooks


@pytest.mark.parametrize("switch", ["0", "1"])
def test_the_env_switch_holds_for_init_too(
    switch: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _native()
    monkeypatch.setenv("STEPSCOPE_NATIVE_HOOKS", switch)
    with stepscope.init(output=str(tmp_path), job="switch") as session:
        native = _recorder.native_module(session.agent.recorder)
    assert (native is not None) == (switch == "1")


def test_a_hook_is_initialised_once_and_shows_the_wrapped_callables_names() -> None:
    native = _native()
    rec = _recorder.new_recorder(deque())

    def original(it: Any) -> int:
        """The wrapped function's docstring."""
        return 1

    hook = native.Hook(native.NEXT, rec, original, original)
    with pytest.raises(TypeError, match="initialised once"):
        hook.__init__(native.NEXT, rec, print, print)  # a call in flight may hold the old fields
    assert hook.__wrapped__ is original
    assert (hook.__name__, hook.__module__, hook.__doc__) == (
        "original",
        __name__,
        "The wrapped function's docstring.",
    )


class _FlakyRows(list[Any]):
    """Rows whose first append fails (a listener's or the store's failure, say)."""

    failed = False

    def append(self, row: Any) -> None:
        if not self.failed:
            self.failed = True
            raise OSError("row lost")
        super().append(row)


@pytest.mark.parametrize("native", [True, False])
def test_a_step_whose_row_is_lost_still_counts_in_either_recorder(native: bool) -> None:
    rows = _FlakyRows()
    rec = _recorder.new_recorder(rows, native)  # type: ignore[arg-type]
    for i in range(3):
        rec.on_optimizer_start(float(i))
        with contextlib.suppress(OSError):
            rec.on_optimizer_end(i + 0.5)
    assert rec.train_steps == 3
    assert [row[1] for row in rows] == [1, 2]  # numbered by optimizer step, none reused


class _ModeUnreadable:
    @property
    def training(self) -> bool:
        raise RuntimeError("mode unreadable")

    def __call__(self, x: int) -> int:
        return x + 1


@pytest.mark.parametrize("native", [True, False])
def test_a_root_whose_mode_cannot_be_read_gets_a_fault_not_a_row(native: bool) -> None:
    if native:
        _native()
    faults = FaultBoundary(open_store("memory://mode-unreadable"), {"rank": 0})
    rec = _recorder.new_recorder(deque(), native)
    rec.boundary = 0.0
    forwards = TorchHooks(rec, faults).forwards
    module = _ModeUnreadable()
    forwards.roots[id(module)] = module
    inherited = _ModeUnreadable.__call__
    call = forwards.native_call(inherited) if native else forwards.python_call(inherited)
    assert call(module, 1) == 2  # the forward's result, untouched
    assert not rec.rows and rec.eval_steps == 0 and not rec._in_forward
    assert "mode unreadable" in str(faults.log.records["step-hooks"]["error"])
