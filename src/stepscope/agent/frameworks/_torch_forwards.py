"""The forwards of any PyTorch loop: which modules are the roots, and the timed
``__call__`` of their classes.

Global module hooks run only until the first optimizer step, to find the root
modules (outermost modules that own parameters); then the ``__call__`` of the roots'
classes is wrapped. Any module hook, even on the root alone, sends its calls
through torch's slow path (~2.5 us a forward and ~2-3 us more in the backward on
this machine); the wrapper keeps the fast path, and other instances of a root's
class pay one identity test. On a native recorder the wrapper is a C ``Hook``
(agent/_native.c); every callback runs behind the fault boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._native_hooks import Wrapped, call_hook
from stepscope.agent._recorder import StepRecorder

if TYPE_CHECKING:
    from torch import nn
    from torch.utils.hooks import RemovableHandle

    from stepscope.agent._native import Hook

INHERITED = object()  # a patched attribute the class did not define itself
# (owner, name, what it had): classes and modules whose attribute was replaced
Patches = list[tuple[object, str, object]]


class RootForwards:
    """Finds the root modules until the first optimizer step, then times their forwards."""

    def __init__(
        self,
        rec: StepRecorder,
        faults: FaultBoundary,
        patches: Patches,
        on_root: Callable[[], None],
    ) -> None:
        self.rec, self.faults = rec, faults
        self._patches = patches  # the hooks' own list: they put every patch back
        self._on_root = on_root  # a root's forward before the first step (CUDA yet?)
        self.discovery: list[RemovableHandle] = []  # the global hooks, while they look
        self._stack: list[int] = []  # module ids, while global hooks find the roots
        self.roots: dict[int, nn.Module] = {}
        self._has_params: dict[int, bool] = {}
        # torch's own predicate, looked up once (install): the hooks run on every step.
        self.grad_enabled: Callable[[], bool] = lambda: True

    def install(self) -> None:
        """Look for the roots with global module hooks (torch imported)."""
        from torch.nn.modules import module as nn_module

        self.rec._hooks_pending = True  # root discovery, at the first optimizer step
        self.discovery = [
            nn_module.register_module_forward_pre_hook(self._global_fwd_pre),
            nn_module.register_module_forward_hook(self._global_fwd_post, always_call=True),
        ]

    def stop_looking(self) -> None:
        """Remove the global hooks: no more roots are looked for."""
        for handle in self.discovery:
            handle.remove()
        self.discovery, self._stack = [], []
        self.rec._hooks_pending = False

    def time_roots(self) -> None:
        """At the first optimizer step: stop looking, time the roots found by class."""
        self.stop_looking()
        for module in self.roots.values():
            self._wrap_class_call(type(module))

    def _owns_params(self, module: nn.Module) -> bool:
        key = id(module)
        if key not in self._has_params:
            self._has_params[key] = next(module.parameters(), None) is not None
        return self._has_params[key]

    def _global_fwd_pre(self, module: nn.Module, _args: tuple[object, ...]) -> None:
        try:
            if not self._stack and self._owns_params(module):
                self.roots[id(module)] = module
                self._on_root()
                self.rec.on_forward_start(perf_counter())
            self._stack.append(id(module))
        except Exception as exc:
            self.faults.record("step-hooks", exc)

    def _global_fwd_post(self, module: nn.Module, _args: tuple[object, ...], _out: object) -> None:
        try:
            if self._stack and self._stack[-1] == id(module):
                self._stack.pop()
                if not self._stack and id(module) in self.roots:
                    training = module.training and self.grad_enabled()
                    self.rec.on_forward_end(perf_counter(), training)
        except Exception as exc:
            self.faults.record("step-hooks", exc)

    def _wrap_class_call(self, cls: type) -> None:
        """Time the forwards of the roots of class ``cls`` (see the module docstring)."""
        if any(owner is cls and name == "__call__" for owner, name, _ in self._patches):
            return
        inherited = cls.__call__
        self._patches.append((cls, "__call__", cls.__dict__.get("__call__", INHERITED)))
        setattr(cls, "__call__", self.native_call(inherited) or self.python_call(inherited))  # noqa: B010

    def native_call(self, inherited: Wrapped) -> Hook | None:
        """The C wrapper of ``inherited`` (None: a Python recorder)."""
        roots = tuple(self.roots.values())
        return call_hook(self.rec, self.faults, inherited, roots, self.grad_enabled)

    def python_call(self, inherited: Wrapped) -> Wrapped:
        """The Python wrapper of ``inherited``: times the roots' forwards."""
        roots, rec, faults, grad_enabled = self.roots, self.rec, self.faults, self.grad_enabled

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
