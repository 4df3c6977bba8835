"""The hooks that let the agent see steps in any PyTorch loop, with no code change.

* ``optimizer.step()``: torch's global optimizer step hooks (fire once per real
  optimizer, whatever wraps it: accelerate, LR schedulers); ``GradScaler.step``
  is wrapped too so that a step it skips (inf gradients) still counts once.
* forwards: global module hooks only until the first optimizer step, to find
  the root modules (outermost modules that own parameters); then the
  ``__call__`` of the roots' classes is wrapped. Any module hook, even on the
  root alone, sends its calls through torch's slow path (~2.5 us a forward and
  ~2-3 us more in the backward on this machine); the wrapper keeps the fast
  path, and other instances of a root's class pay one identity test.
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
from stepscope.agent._native_hooks import Wrapped, call_hook, optimizer_hooks
from stepscope.agent._recorder import StepRecorder
from stepscope.agent.frameworks._torch_timers import StepTimers
from stepscope.agent.profilers._workers import WorkerFetchTimer

if TYPE_CHECKING:
    from torch import nn
    from torch.amp import GradScaler
    from torch.optim import Optimizer
    from torch.utils.hooks import RemovableHandle

    from stepscope.agent._native import Hook
    from stepscope.agent._native_hooks import OptimizerHook

_INHERITED = object()  # a patched attribute the class did not define itself


class TorchHooks:
    """Installs and removes every hook; ``install`` needs torch imported."""

    def __init__(self, rec: StepRecorder, faults: FaultBoundary) -> None:
        self.rec, self.faults = rec, faults
        self._handles: list[RemovableHandle] = []
        self._discovery: list[RemovableHandle] = []
        # (owner, name, what it had): classes and modules whose attribute we replaced
        self._patches: list[tuple[object, str, object]] = []
        self._stack: list[int] = []  # module ids, while global hooks find the roots
        self._roots: dict[int, nn.Module] = {}
        self._has_params: dict[int, bool] = {}
        self.timers = StepTimers(rec, faults)  # backward() and the data wait
        # Fetch times inside DataLoader workers, for data-loader windows.
        self.worker_fetch = WorkerFetchTimer()
        self.on_first_step: Callable[[], None] | None = None  # after the first optimizer step
        # torch's own predicates, looked up once: the hooks run on every step.
        self._grad_enabled: Callable[[], bool] = lambda: True
        self._cuda_initialized: Callable[[], bool] = lambda: False
        self.device: DeviceSampler | None = None  # once the process uses CUDA
        self.memory: MemoryReader | None = None  # the allocator's readings, with the device
        self.installed = False

    # -- install / remove -------------------------------------------------------
    def install(self) -> None:
        import torch
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim

        self._grad_enabled = torch.is_grad_enabled
        self._cuda_initialized = torch.cuda.is_initialized
        pre, post = self._optimizer_hooks()
        self._handles += [
            optim.register_optimizer_step_pre_hook(pre),
            optim.register_optimizer_step_post_hook(post),
        ]
        self.rec._hooks_pending = True  # root discovery, at the first optimizer step
        self._discovery = [
            nn_module.register_module_forward_pre_hook(self._global_fwd_pre),
            nn_module.register_module_forward_hook(self._global_fwd_post, always_call=True),
        ]
        self._patch(torch.autograd, "backward", self.timers.wrap_backward)
        from torch.utils.data import dataloader

        self._patch(dataloader._BaseDataLoaderIter, "__next__", self.timers.wrap_next)
        self._patch(torch.amp.GradScaler, "step", self._wrap_scaler_step)
        self.worker_fetch.install()
        self.rec.worker_fetch = self.worker_fetch
        self.installed = True

    def remove(self) -> None:
        for handle in self._handles + self._discovery:
            handle.remove()
        self._handles, self._discovery = [], []
        for owner, name, original in reversed(self._patches):
            if original is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._patches = []
        self.worker_fetch.remove()
        self.rec.worker_fetch = None
        self.rec._hooks_pending = False
        self.installed = False

    def yield_forwards(self) -> None:
        """Another adapter times the forwards (Keras 3 on torch, whose layers are torch
        modules): stop looking for root modules, whose global hooks would count each
        Keras forward twice. Optimizer steps, ``backward()`` and the DataLoader stay."""
        for handle in self._discovery:
            handle.remove()
        self._discovery, self._stack = [], []
        self.rec._hooks_pending = False

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
            if self._discovery:
                self._time_roots_by_class()
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

    # -- forward --------------------------------------------------------------------
    def _owns_params(self, module: nn.Module) -> bool:
        key = id(module)
        if key not in self._has_params:
            self._has_params[key] = next(module.parameters(), None) is not None
        return self._has_params[key]

    def _global_fwd_pre(self, module: nn.Module, _args: tuple[object, ...]) -> None:
        try:
            if not self._stack and self._owns_params(module):
                self._roots[id(module)] = module
                if self.device is None:
                    self._watch_cuda()
                self.rec.on_forward_start(perf_counter())
            self._stack.append(id(module))
        except Exception as exc:
            self.faults.record("step-hooks", exc)

    def _global_fwd_post(self, module: nn.Module, _args: tuple[object, ...], _out: object) -> None:
        try:
            if self._stack and self._stack[-1] == id(module):
                self._stack.pop()
                if not self._stack and id(module) in self._roots:
                    training = module.training and self._grad_enabled()
                    self.rec.on_forward_end(perf_counter(), training)
        except Exception as exc:
            self.faults.record("step-hooks", exc)

    def _time_roots_by_class(self) -> None:
        for handle in self._discovery:
            handle.remove()
        self._discovery, self._stack = [], []
        self.rec._hooks_pending = False
        for module in self._roots.values():
            self._wrap_class_call(type(module))

    def _wrap_class_call(self, cls: type) -> None:
        """Time the forwards of the roots of class ``cls`` (see the module docstring)."""
        if any(owner is cls and name == "__call__" for owner, name, _ in self._patches):
            return
        inherited = cls.__call__
        self._patches.append((cls, "__call__", cls.__dict__.get("__call__", _INHERITED)))
        setattr(cls, "__call__", self._native_call(inherited) or self._python_call(inherited))  # noqa: B010

    def _native_call(self, inherited: Wrapped) -> Hook | None:
        roots = tuple(self._roots.values())
        return call_hook(self.rec, self.faults, inherited, roots, self._grad_enabled)

    def _python_call(self, inherited: Wrapped) -> Wrapped:
        roots, rec, faults, grad_enabled = self._roots, self.rec, self.faults, self._grad_enabled

        # Flat on purpose: this runs on every forward of a root (docs/design.md). The
        # depth and the mode are the hook's; what the forward records, the recorder's.
        def __call__(module: nn.Module, *args: object, **kwargs: object) -> object:
            if id(module) not in roots:
                return inherited(module, *args, **kwargs)
            rec._root_depth += 1
            if rec._root_depth == 1:
                try:
                    rec.on_forward_start(perf_counter())
                except Exception as exc:
                    faults.record("step-hooks", exc)
            try:
                return inherited(module, *args, **kwargs)
            finally:  # also when the forward raises, as an always_call hook would
                rec._root_depth -= 1
                if not rec._root_depth:
                    t = perf_counter()
                    try:  # reading the mode may fail: ours, not the forward's, and no row
                        rec.on_forward_end(t, module.training and grad_enabled())
                    except Exception as exc:
                        rec._in_forward = False
                        faults.record("step-hooks", exc)

        return __call__

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
