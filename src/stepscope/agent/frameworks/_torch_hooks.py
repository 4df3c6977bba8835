"""The hooks that let the agent see steps in any PyTorch loop, with no code change.

* ``optimizer.step()``: torch's global optimizer step hooks (fire once per real
  optimizer, whatever wraps it: accelerate, LR schedulers); ``GradScaler.step``
  is wrapped too so that a step it skips (inf gradients) still counts once.
* forwards: global module hooks only until the first optimizer step, to find
  the root modules; then the ``__call__`` of the roots' classes is wrapped, which
  keeps torch's fast path (``_torch_forwards.py``).
* ``backward()``: ``torch.autograd.backward``, which ``Tensor.backward`` calls;
  data wait: ``_BaseDataLoaderIter.__next__`` (both wrapped by ``_timers.py``).

The Python hooks here read the clock and call the recorder's methods
(agent/_recorder.py), the one Python definition of what a step records. On a
native recorder each hook is a C ``Hook`` (agent/_native.c) that does the common
case itself and calls the same Python code for the rest. Every callback runs
behind the fault boundary: a bug here never reaches training.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING

from stepscope.agent._cuda import DeviceSampler, DeviceTimer
from stepscope.agent._cuda_memory import MemoryReader
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._native_hooks import Wrapped, optimizer_hooks
from stepscope.agent._recorder import StepRecorder
from stepscope.agent.frameworks._torch_forwards import INHERITED, Patches, RootForwards
from stepscope.agent.frameworks._torch_timers import StepTimers
from stepscope.agent.profilers._workers import WorkerFetchTimer

if TYPE_CHECKING:
    from torch.amp import GradScaler
    from torch.optim import Optimizer
    from torch.utils.hooks import RemovableHandle

    from stepscope.agent._native_hooks import OptimizerHook


class TorchHooks:
    """Installs and removes every hook; ``install`` needs torch imported."""

    def __init__(self, rec: StepRecorder, faults: FaultBoundary) -> None:
        self.rec, self.faults = rec, faults
        self._handles: list[RemovableHandle] = []
        self._patches: Patches = []  # classes and modules whose attribute we replaced
        self.forwards = RootForwards(rec, faults, self._patches, self._watch_cuda)
        self.timers = StepTimers(rec, faults)  # backward() and the data wait
        # Fetch times inside DataLoader workers, for data-loader windows.
        self.worker_fetch = WorkerFetchTimer()
        self.on_first_step: Callable[[], None] | None = None  # after the first optimizer step
        # torch's own predicate, looked up once: the hooks run on every step.
        self._cuda_initialized: Callable[[], bool] = lambda: False
        self.device: DeviceSampler | None = None  # once the process uses CUDA
        self.memory: MemoryReader | None = None  # the allocator's readings, with the device
        self.installed = False

    # -- install / remove -------------------------------------------------------
    def install(self) -> None:
        import torch
        from torch.optim import optimizer as optim

        self.forwards.grad_enabled = torch.is_grad_enabled
        self._cuda_initialized = torch.cuda.is_initialized
        pre, post = self._optimizer_hooks()
        self._handles += [
            optim.register_optimizer_step_pre_hook(pre),
            optim.register_optimizer_step_post_hook(post),
        ]
        self.forwards.install()  # root discovery, until the first optimizer step
        self._patch(torch.autograd, "backward", self.timers.wrap_backward)
        from torch.utils.data import dataloader

        self._patch(dataloader._BaseDataLoaderIter, "__next__", self.timers.wrap_next)
        self._patch(torch.amp.GradScaler, "step", self._wrap_scaler_step)
        self.worker_fetch.install()
        self.rec.worker_fetch = self.worker_fetch
        self.installed = True

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.forwards.stop_looking()
        for owner, name, original in reversed(self._patches):
            if original is INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._patches.clear()  # the list the forwards share
        self.worker_fetch.remove()
        self.rec.worker_fetch = None
        self.installed = False

    def yield_forwards(self) -> None:
        """Another adapter times the forwards (Keras 3 on torch, whose layers are torch
        modules): stop looking for root modules, whose global hooks would count each
        Keras forward twice. Optimizer steps, ``backward()`` and the DataLoader stay."""
        self.forwards.stop_looking()

    def _patch(self, owner: object, name: str, wrap: Callable[[Wrapped], Wrapped]) -> None:
        original = getattr(owner, name)
        self._patches.append((owner, name, original))
        setattr(owner, name, wrap(original))

    # -- optimizer ----------------------------------------------------------------
    def _optimizer_hooks(self) -> tuple[OptimizerHook, OptimizerHook]:
        """The pre and post hooks: C ones (agent/_native.c) on a native recorder."""
        native = optimizer_hooks(self.rec, self.faults, self._after_step)
        return native or (self._opt_pre, self._opt_post)

    # torch calls these with (optimizer, args, kwargs); the GradScaler wrapper with none
    def _opt_pre(
        self, _opt: Optimizer | None = None, _args: object = None, _kwargs: object = None
    ) -> None:
        try:
            self.rec.on_optimizer_start(perf_counter())
        except Exception as exc:
            self.faults.record("step-hooks", exc)

    def _opt_post(
        self, _opt: Optimizer | None = None, _args: object = None, _kwargs: object = None
    ) -> None:
        rec = self.rec
        try:
            rec.on_optimizer_end(perf_counter())
        except Exception as exc:
            self.faults.record("step-hooks", exc)
        if rec._hooks_pending or (rec.device is None and rec.train_steps & 255 == 1):
            self._after_step()  # (also every 256th untimed step on CUDA: a cheap return)

    def _after_step(self) -> None:
        """Root discovery ends at the first step; CUDA is looked for every 256 steps."""
        try:
            if self.forwards.discovery:
                self.forwards.time_roots()
                if self.on_first_step is not None:
                    self.on_first_step()
            # A process that starts CUDA late (after its first steps) is looked at
            # again every 256 steps, not at every forward: the check is a Python call.
            if self.device is None and self.rec.train_steps & 255 == 1:
                self._watch_cuda()
        except Exception as exc:
            self.faults.record("step-hooks", exc)

    def _wrap_scaler_step(self, original: Wrapped) -> Wrapped:
        def step(
            scaler: GradScaler, optimizer: Optimizer, *args: object, **kwargs: object
        ) -> object:
            self._opt_pre()
            try:
                return original(scaler, optimizer, *args, **kwargs)
            finally:
                self._opt_post()

        return step

    def _watch_cuda(self) -> None:
        """Start timing device work once the process has initialised CUDA itself."""
        # Never initialise CUDA ourselves: only follow a process that already did.
        if self.device is None and self._cuda_initialized():
            import torch

            rec = self.rec
            memory = MemoryReader(torch.cuda, self.faults.record, lambda: rec.train_steps)
            self.memory = memory  # its last readings go into an out-of-memory fault
            self.device = DeviceSampler(self.rec, DeviceTimer(torch.cuda, memory))
            self.device.attach()
