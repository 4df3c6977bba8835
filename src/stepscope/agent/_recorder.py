"""Step accounting: turns hook callbacks into one row per step.

Times come in as ``time.perf_counter()`` values; the writer converts them to
wall-clock time off the training thread. A training step ends when the
outermost ``optimizer.step()`` returns; an evaluation step ends when a forward
of the model outside training returns (docs/format.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from stepscope.agent._cuda import DeviceTimer, Timed

if TYPE_CHECKING:
    from stepscope.agent.profilers._workers import WorkerFetchTimer

# Called at a step boundary with (phase, step number just ended, perf time); returns
# the (train, eval) step numbers from which it wants to be called again ((0, 0) or
# None: at every boundary).
Listener = Callable[[str, int, float], "tuple[int, int] | None"]
EVERY_STEP = (0, 0)
NEVER = (1 << 62, 1 << 62)  # until poked

# (phase, step, start, end, data_wait, forward, backward, optimizer, collective,
#  collective outside the four parts, profiled, device marks)
StepRow = tuple[
    str, int, float, float, float, float, float, float, float, float, bool, list[Timed] | None
]


class RowSink(Protocol):
    """Where a recorder puts its rows: the agent's step buffer (agent/_stepbuf.py), or
    a deque in tests."""

    def append(self, row: StepRow, /) -> None: ...


class StepRecorder:
    """State machine fed by the torch hooks (or by the explicit API).

    Its per-step fields are set in ``__init__`` only, never as class attributes:
    :class:`NativeStepRecorder` keeps them in C, behind descriptors that a class
    attribute here would hide.
    """

    def __init__(self, rows: RowSink, device: DeviceTimer | None = None) -> None:
        self.rows = rows
        self.boundary: float | None = None
        self.data = self.forward = self.backward = self.optimizer = 0.0
        self.collective = (
            0.0  # time in torch.distributed collectives (agent/frameworks/_torch_collectives.py)
        )
        self.collective_outside = 0.0  # the part outside the four parts: not "other"
        self.train_steps = self.eval_steps = 0
        self.profiled = False
        # Called after a step, in order, when one of them asked for it (see Listener):
        # the window scheduler opens and closes windows there, the tensor capture hands
        # over its batch. Each listener guards itself. Most steps call none: a call is
        # paid on every step of the training (docs/design.md).
        self.listeners: list[Listener] = []
        # Set from any thread to call every listener at the next boundary.
        self.poke = False
        self._due_train, self._due_eval = EVERY_STEP
        # Set only while a data-loader profiling window is open: gets every batch's times.
        self.on_batch: Callable[[float, float], None] | None = None
        # Run once at the next data fetch or forward: starting or stopping the PyTorch
        # profiler inside ``optimizer.step()`` (a profiler scope) corrupts memory.
        self.deferred: Callable[[], None] | None = None
        # The fetch timer of DataLoader workers, once hooks are in.
        self.worker_fetch: WorkerFetchTimer | None = None
        # Set once CUDA is in use: CUDA events time the device side of each part.
        self.device = device
        self._opt_depth = 0
        self._root_depth = 0  # nested forwards of root modules (agent/frameworks/_torch_hooks.py)
        self._opt_start = self._fwd_start = 0.0
        self._in_forward = False
        # The hooks' own work is due after the next optimizer step (root discovery).
        self._hooks_pending = False

    # The callbacks below are the one Python definition of what a step records: the
    # Python hooks (frameworks/_torch_hooks.py, _torch_timers.py) call them for every
    # case, agent/_native.c does their common case (no device timer, no data-loader
    # window or deferred call, first boundary passed) in C and calls them for the
    # rest. A change here goes to _native.c too: tests/test_hooks.py and
    # tests/test_native_hooks.py check that both agree. They run several times per
    # step on the training thread and are kept flat (no helper calls): every call is
    # paid on every step.
    def on_data(self, t0: float, t1: float) -> None:
        if self.boundary is None:
            self.boundary = t0
        self.data += t1 - t0
        if self.on_batch is not None:
            self.on_batch(t0, t1)
        if self.deferred is not None:
            self._run_deferred()

    def _run_deferred(self) -> None:
        deferred, self.deferred = self.deferred, None
        if deferred is not None:
            deferred()

    def on_forward_start(self, t: float) -> None:
        if self.deferred is not None:
            self._run_deferred()
        if self.boundary is None:
            self.boundary = t
        self._fwd_start = t
        self._in_forward = True
        if self.device is not None:
            self.device.start("forward")

    def on_forward_end(self, t: float, training: bool) -> None:
        self.forward += t - self._fwd_start
        self._in_forward = False
        if self.device is not None:
            self.device.end("forward")
        if not training:
            try:  # the step counts even if its row could not be stored
                self._emit("eval", self.eval_steps, t)
            finally:
                self.eval_steps += 1

    def on_backward_start(self) -> None:
        if self.device is not None:
            self.device.start("backward")

    def on_backward(self, t0: float, t1: float) -> None:
        if self.boundary is None:
            self.boundary = t0
        self.backward += t1 - t0
        if self.device is not None:
            self.device.end("backward")

    def on_optimizer_start(self, t: float) -> None:
        self._opt_depth += 1
        if self._opt_depth == 1:
            if self.boundary is None:
                self.boundary = t
            self._opt_start = t
            if self.device is not None:
                self.device.start("optimizer")

    def on_optimizer_end(self, t: float) -> None:
        self._opt_depth -= 1
        if self._opt_depth <= 0:
            self._opt_depth = 0
            self.optimizer += t - self._opt_start
            if self.device is not None:
                self.device.end("optimizer")
            self.end_train_step(t)

    def on_optimizer_part(self, t0: float, t1: float) -> None:
        """An optimizer update inside a step that another call ends (Keras' train
        function on its PyTorch backend): its time, without ending the step."""
        self.optimizer += t1 - t0

    def on_collective(self, t0: float, t1: float, in_backward: bool) -> None:
        """Time spent in a collective; before the first step, it belongs to no step."""
        if self.boundary is None:
            return  # set-up (DDP's parameter broadcast), not training
        self.collective += t1 - t0
        if not (in_backward or self._in_forward or self._opt_depth):
            self.collective_outside += t1 - t0

    def end_train_step(self, t: float) -> None:
        """Close the current training step at ``t`` (also the explicit ``stepscope.step()``)."""
        try:  # the step counts even if its row could not be stored
            self._emit("train", self.train_steps, t)
        finally:
            self.train_steps += 1

    def _emit(self, phase: str, step: int, t: float, /) -> None:
        start = self.boundary if self.boundary is not None else t
        row = (
            phase,
            step,
            start,
            t,
            self.data,
            self.forward,
            self.backward,
            self.optimizer,
            self.collective,
            self.collective_outside,
            self.profiled,
            self.device.take() if self.device is not None else None,
        )
        self.rows.append(row)
        self.boundary = t
        self.data = self.forward = self.backward = self.optimizer = 0.0
        self.collective = self.collective_outside = 0.0
        if self.poke or step + 1 >= (self._due_train if phase == "train" else self._due_eval):
            self._call_listeners(phase, step, t)

    def _call_listeners(self, phase: str, step: int, t: float) -> None:
        # Cleared before the calls: a poke set meanwhile is seen at the next boundary.
        self.poke = False
        train, evals = NEVER
        for listener in self.listeners:
            wake = listener(phase, step, t) or EVERY_STEP
            train, evals = min(train, wake[0]), min(evals, wake[1])
        self._due_train, self._due_eval = train, evals

    def listen(self, listener: Listener) -> None:
        """Add ``listener``; it is called at the next boundary."""
        self.listeners.append(listener)
        self.poke = True

    def unlisten(self, listener: Listener) -> None:
        if listener in self.listeners:
            self.listeners.remove(listener)


@functools.cache
def _native_class() -> type[StepRecorder] | None:
    try:
        from stepscope.agent._native import RecorderState
    except ImportError:  # no compiler at install time: the pure-Python hooks run
        return None

    class NativeStepRecorder(StepRecorder, RecorderState):
        """StepRecorder with its per-step fields in C (agent/_native.c)."""

        # The C ``_emit`` replaces the Python one; every other method is StepRecorder's.
        _emit = RecorderState._emit

    return NativeStepRecorder


def new_recorder(rows: RowSink, native: bool = True) -> StepRecorder:
    """A recorder whose per-step fields live in C (agent/_native.c) when ``native``
    and built, else in Python; the hooks take the C fast path for the former."""
    cls = _native_class() if native else None
    return (cls or StepRecorder)(rows)


def native_module(rec: StepRecorder) -> ModuleType | None:
    """``stepscope.agent._native`` if ``rec`` keeps its fields in C, else None."""
    cls = _native_class()
    if cls is None or not isinstance(rec, cls):
        return None
    from stepscope.agent import _native

    return _native
