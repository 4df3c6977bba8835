"""Losses: the values ``backward()`` starts from, and the outputs of loss modules.

A mixin of :class:`~._capture.TensorCapture`, like ``_capture_params``. The step
hooks' ``backward()`` wrapper hands over its first argument while the capture is
armed (summed over the step: gradient accumulation gives the step's loss, saved
as ``loss``); ``_Loss.__call__`` is wrapped only while armed, and a loss module's
one-element output is averaged over the step as ``<LossClass>_output_0``, its
inputs taken when a collection wants module inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVarTuple

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder
from stepscope.agent.tensors._modules import MODULE_KINDS, tensors_of
from stepscope.agent.tensors._pending import Pending
from stepscope.agent.tensors._plans import Plan

if TYPE_CHECKING:
    import torch
    from torch import nn

    from stepscope.agent._native_hooks import Wrapped

Ts = TypeVarTuple("Ts")


class LossCapture:
    """The loss part of ``TensorCapture``; its state lives on the capture."""

    # Set by TensorCapture.__init__ (declared here for the type checker only).
    rec: StepRecorder
    faults: FaultBoundary
    pending: Pending
    plan: Callable[[str, int], Plan]
    _take: Callable[[Plan, str, tuple[str, int, str], torch.Tensor], None]
    armed: bool
    _loss_names: dict[int, str]
    _loss_call: tuple[type[nn.Module], Wrapped] | None

    def _guarded(self, fn: Callable[[*Ts], None]) -> Callable[[*Ts], None]:
        """``fn`` behind the fault boundary (the capture's callbacks run in training)."""

        def guarded(*args: *Ts) -> None:
            try:
                fn(*args)
            except Exception as exc:
                self.faults.record("tensors", exc)

        return guarded

    def _wrap_loss_call(self, original: Wrapped) -> Wrapped:
        on_loss = self._guarded(self._on_loss_module)

        def __call__(module: nn.Module, *args: object, **kwargs: object) -> object:
            out = original(module, *args, **kwargs)
            if self.armed:
                on_loss(module, args, out)
            return out

        return __call__

    def _on_backward(self, tensors: object) -> None:
        import torch

        if not isinstance(tensors, torch.Tensor) or tensors.numel() != 1:
            return
        key = ("train", self.rec.train_steps, "loss")
        chosen = [c for c in self.plan("train", key[1]) if c.selects("loss", "loss")]
        if chosen:
            self.pending.member(chosen, "loss", "loss")
            self.pending.accumulate(key, tensors, "sum")

    def _loss_name(self, module: nn.Module) -> str:
        name = self._loss_names.get(id(module))
        if name is None:
            cls = type(module).__name__
            same = sum(1 for n in self._loss_names.values() if n.split("_")[0] == cls)
            name = self._loss_names[id(module)] = cls if not same else f"{cls}_{same}"
        return name

    def _on_loss_module(self, module: nn.Module, args: tuple[object, ...], out: object) -> None:
        import torch

        training = torch.is_grad_enabled() and self.rec.forward > 0
        phase = "train" if training else "eval"
        step = self.rec.train_steps if training else max(self.rec.eval_steps - 1, 0)
        plan = self.plan(phase, step)
        if not plan:
            return
        name = self._loss_name(module)
        if isinstance(out, torch.Tensor) and out.numel() == 1:
            chosen = [c for c in plan if c.selects("loss", f"{name}_output_0")]
            if chosen:
                self.pending.member(chosen, f"{name}_output_0", "loss")
                self.pending.accumulate((phase, step, f"{name}_output_0"), out, "mean")
        if any(c.kinds & MODULE_KINDS for c in plan):
            for i, t in tensors_of(args):
                self._take(plan, "input", (phase, step, f"{name}_input_{i}"), t)

    def _wrap_losses(self, on: bool) -> None:
        """Loss modules are wrapped only while armed: their calls cost nothing else."""
        if self._loss_call is None:
            return
        cls, wrapper = self._loss_call
        if on and "__call__" not in cls.__dict__:
            setattr(cls, "__call__", wrapper)  # noqa: B010
        elif not on and cls.__dict__.get("__call__") is wrapper:
            delattr(cls, "__call__")
