"""Time at collectives: how long a rank's steps spend in ``torch.distributed``.

Two sources, both host wall time, both summed into the step's ``collective``
column (docs/format.md, docs/distributed.md):

* **Collectives called from Python** (``dist.all_reduce``, ``broadcast``,
  ``barrier``, ``all_gather``..., point-to-point ``send``/``recv``, DDP's buffer
  broadcast ``_broadcast_coalesced``, and ``Work.wait()`` of async ones): each
  function is wrapped while the agent runs and restored when it stops. Only the
  outermost call counts (``all_gather_object`` calls ``all_gather`` inside).
* **DDP's gradient all-reduce** runs in C++ inside ``backward()``, where Python
  cannot wrap it. At the start of every ``backward()`` of a process group
  member, a one-shot pre-hook on the root's ``grad_fn`` queues an autograd
  final callback; final callbacks run in queue order once the gradients are
  computed, so ours runs before DDP's ``finalize_backward``, which waits for
  every bucket's all-reduce. From our callback to the return of ``backward()``
  is the time the rank waited for its peers' gradients (the all-reduce that did
  not overlap with compute).

Not measured: collectives issued from C++ other than DDP's (c10d functional
collectives inside compiled graphs), and, on NCCL, the device side: a CUDA
collective returns to the host once enqueued, so its wait shows on the device
(``gpu_backward``) and at the next host synchronisation, not here. On gloo (CPU)
every wait blocks the host and is all counted.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeVar

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder

if TYPE_CHECKING:
    import torch
    from torch.utils.hooks import RemovableHandle

P = ParamSpec("P")
R = TypeVar("R")


class _Autograd(Protocol):
    """``torch.autograd``, whose ``backward`` is wrapped while a process group exists."""

    backward: Callable[..., None]


COLLECTIVES = (
    "all_reduce",
    "all_reduce_coalesced",
    "broadcast",
    "barrier",
    "monitored_barrier",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_gather_coalesced",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "gather",
    "gather_object",
    "scatter",
    "scatter_object_list",
    "broadcast_object_list",
    "all_to_all",
    "all_to_all_single",
    "send",
    "recv",
    "batch_isend_irecv",
    "_broadcast_coalesced",
)


class CollectiveTimer:
    """Wraps the collectives and ``backward()``; reports each interval to the recorder."""

    def __init__(self, rec: StepRecorder, faults: FaultBoundary) -> None:
        self.rec, self.faults = rec, faults
        self._patches: list[tuple[object, str, object]] = []  # (owner, name, original)
        self._local = threading.local()  # depth of wrapped calls, per thread
        self._in_backward = 0
        self._handle: RemovableHandle | None = None  # the armed pre-hook of the current backward
        self._graph_done: float | None = None  # when our final callback ran
        self._compiling: Callable[[], bool] = lambda: False
        self._dist_on: Callable[[], bool] = lambda: False
        self._autograd: _Autograd | None = None  # torch.autograd, once installed
        self._backward: Callable[..., None] | None = None  # the backward() we wrapped
        self.installed = False

    def install(self) -> None:
        """Wrap every collective present in this torch build (needs torch imported)."""
        import torch
        import torch.distributed as dist

        if not dist.is_available():
            return
        from torch._C._distributed_c10d import Work
        from torch.distributed import distributed_c10d as c10d

        self._compiling = torch.compiler.is_compiling
        self._dist_on = dist.is_initialized
        for name in COLLECTIVES:
            for owner in (dist, c10d):
                if callable(getattr(owner, name, None)):
                    self._patch(owner, name, self._timed)
        self._patch(Work, "wait", self._timed)
        self._autograd = torch.autograd
        if callable(getattr(c10d, "_update_default_pg", None)):
            self._patch(c10d, "_update_default_pg", self._follow_default_pg)
            self._sync_backward()
        else:  # no hook on the default group here: wrap backward() for good
            self._wrap_backward_on(True)
        self.installed = True

    def remove(self) -> None:
        """Restore every wrapped function (in reverse order: wrappers of wrappers)."""
        self._wrap_backward_on(False)
        for owner, name, original in reversed(self._patches):
            setattr(owner, name, original)
        self._patches = []
        self.installed = False

    # -- backward() is wrapped only while a default process group exists --------------
    def _follow_default_pg(self, original: Callable[P, R]) -> Callable[P, R]:
        def update(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return original(*args, **kwargs)
            finally:
                self._sync_backward()

        return update

    def _sync_backward(self) -> None:
        """Wrap ``backward()`` once a default group exists, unwrap it when it is gone.

        A non-distributed loop then pays nothing in its backward; ``init_process_group``
        (also from ``init_device_mesh``) and ``destroy_process_group`` go through
        ``_update_default_pg``.
        """
        try:
            self._wrap_backward_on(self._dist_on())
        except Exception as exc:
            self.faults.record("collectives", exc)

    def _wrap_backward_on(self, on: bool) -> None:
        autograd = self._autograd
        if autograd is None or on == (self._backward is not None):
            return
        if on:
            self._backward = autograd.backward
            autograd.backward = functools.wraps(self._backward)(self._wrap_backward(self._backward))
        elif self._backward is not None:  # always, past the test above
            autograd.backward, self._backward = self._backward, None

    def _patch(
        self, owner: object, name: str, wrap: Callable[[Callable[P, R]], Callable[P, R]]
    ) -> None:
        original = getattr(owner, name)
        self._patches.append((owner, name, original))
        setattr(owner, name, functools.wraps(original)(wrap(original)))

    def _timed(self, original: Callable[P, R]) -> Callable[P, R]:
        local = self._local

        def timed(*args: P.args, **kwargs: P.kwargs) -> R:
            # Nested calls are inside the outer one's time; under torch.compile the
            # original is traced as it is, without our clock (no graph break).
            if self._compiling() or local.__dict__.get("depth", 0):
                return original(*args, **kwargs)
            local.depth, t0 = 1, perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                local.depth = 0
                self._record(t0, perf_counter())

        return timed

    def _record(self, t0: float, t1: float) -> None:
        if self._graph_done is not None:
            return  # inside backward's final callbacks: the tail measures all of it
        try:
            self.rec.on_collective(t0, t1, self._in_backward > 0)
        except Exception as exc:
            self.faults.record("collectives", exc)

    # -- DDP's all-reduce, at the end of backward --------------------------------------
    def _wrap_backward(self, original: Callable[P, R]) -> Callable[P, R]:
        def backward(*args: P.args, **kwargs: P.kwargs) -> R:
            if self._in_backward or not self._dist_on():
                return original(*args, **kwargs)
            self._arm(args[0] if args else kwargs.get("tensors"))
            self._in_backward += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._in_backward -= 1
                self._disarm(perf_counter())

        return backward

    def _arm(self, tensors: object) -> None:
        """Hook the root of the graph: its pre-hook runs first in the backward pass."""
        try:
            roots = tensors if isinstance(tensors, (list, tuple)) else [tensors]
            fn = next((g for t in roots if (g := getattr(t, "grad_fn", None))), None)
            if fn is not None:
                self._handle = fn.register_prehook(self._queue_callback)
        except Exception as exc:
            self.faults.record("collectives", exc)

    def _queue_callback(self, _grad_outputs: tuple[torch.Tensor, ...]) -> None:
        try:
            from torch.autograd import Variable

            Variable._execution_engine.queue_callback(self._gradients_done)
        except Exception as exc:
            self.faults.record("collectives", exc)

    def _gradients_done(self) -> None:
        self._graph_done = perf_counter()

    def _disarm(self, t1: float) -> None:
        try:
            if self._handle is not None:
                self._handle.remove()
            done, self._handle, self._graph_done = self._graph_done, None, None
            if done is not None:
                self.rec.on_collective(done, t1, True)
        except Exception as exc:
            self.faults.record("collectives", exc)
