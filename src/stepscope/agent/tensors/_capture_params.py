"""Parameters, gradients and optimizer state, taken at each optimizer's step pre-hook.

A mixin of :class:`~._capture.TensorCapture`, which arms the pre-hook only for
training steps whose plan wants one of ``PARAM_KINDS``. The tensors are taken
before the update, from the optimizer's ``param_groups``; the model's frozen
parameters (which no optimizer holds) come from its root modules. Names are
those of the model (``param_names`` over the root modules).

The methods stay methods of the capture (no wrapper objects), so that a saving
step's optimizer hook makes the same calls as when they were defined there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from stepscope.agent._recorder import StepRecorder
from stepscope.agent.tensors._modules import param_names
from stepscope.agent.tensors._pending import Pending
from stepscope.agent.tensors._plans import Plan

if TYPE_CHECKING:
    import torch
    from torch import nn
    from torch.optim import Optimizer

    from stepscope.agent.frameworks._torch_hooks import TorchHooks

PARAM_KINDS = frozenset({"weight", "bias", "gradient", "optimizer"})


class ParamCapture:
    """The optimizer-hook part of ``TensorCapture``; its state lives on the capture."""

    # Set by TensorCapture.__init__ (declared here for the type checker only).
    rec: StepRecorder
    pending: Pending
    plan: Callable[[str, int], Plan]
    _take: Callable[[Plan, str, tuple[str, int, str], torch.Tensor], None]
    _hooks: TorchHooks | None
    _names: dict[int, str]
    _named_roots: int
    _done: tuple[int, set[int]]

    def _param_names(self) -> dict[int, str]:
        roots = self._roots()
        if len(roots) != self._named_roots:  # roots are only ever added
            self._names, self._named_roots = param_names(roots), len(roots)
        return self._names

    def _roots(self) -> list[nn.Module]:
        return list(self._hooks.forwards.roots.values()) if self._hooks is not None else []

    def _on_optimizer(self, optimizer: Optimizer, *_: object) -> None:
        step = self.rec.train_steps
        plan = self.plan("train", step)
        if not any(c.kinds & PARAM_KINDS for c in plan):
            return
        if self._done[0] != step:
            self._done = (step, set())
        done, names = self._done[1], self._param_names()
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if not done:  # the model's frozen parameters, once per step
            params += [p for r in self._roots() for p in r.parameters() if not p.requires_grad]
        for i, p in enumerate(params):
            if id(p) not in done:
                done.add(id(p))
                self._take_param(plan, step, names.get(id(p), f"param_{i}"), p, optimizer)
        self._take_lrs(plan, step, optimizer)

    def _take_param(
        self, plan: Plan, step: int, name: str, p: torch.Tensor, optimizer: Optimizer
    ) -> None:
        kind = "bias" if name.rsplit(".", 1)[-1].startswith("bias") else "weight"
        self._take(plan, kind, ("train", step, name), p)
        if p.grad is not None:
            self._take(plan, "gradient", ("train", step, f"gradient/{name}"), p.grad)
        if any("optimizer" in c.kinds for c in plan):
            for key, value in optimizer.state.get(p, {}).items():
                if hasattr(value, "dim"):
                    self._take(plan, "optimizer", ("train", step, f"optimizer/{name}/{key}"), value)

    def _take_lrs(self, plan: Plan, step: int, optimizer: Optimizer) -> None:
        for g, group in enumerate(optimizer.param_groups):
            name = f"optimizer/lr/group{g}"
            chosen = [c for c in plan if c.selects("optimizer", name)]
            if chosen and isinstance(group.get("lr"), int | float):
                self.pending.member(chosen, name, "optimizer")
                self.pending.add_float(("train", step, name), float(group["lr"]))
