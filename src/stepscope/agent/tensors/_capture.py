"""TensorCapture: saves the collections' tensors on their steps, with no code change.

* losses: the values ``backward()`` starts from (the step hooks' wrapper of
  ``torch.autograd.backward`` hands them over; summed over the step, so that
  gradient accumulation gives the step's loss) as ``loss``, and the outputs of
  loss modules (``nn.CrossEntropyLoss()`` ...; ``_Loss.__call__`` is wrapped),
  averaged over the step, as ``<LossClass>_output_0``, in training and evaluation
  (``_capture_losses``);
* parameters, gradients and optimizer state: at each optimizer's step pre-hook,
  before the update, from the optimizer's ``param_groups`` (frozen parameters of
  the model from its root modules), named as in the model (``_capture_params``);
* module inputs and outputs: forward hooks that exist only on saving steps.

Whether a step saves anything is decided at step boundaries, from the next
saving step of each phase: the per-step callbacks (the loss and optimizer hooks,
the loss handed over by ``backward()``) are armed only for steps that save, so
that a step that saves nothing costs one integer comparison at its boundary and
one attribute test per loss call. Every callback runs behind the fault boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, SupportsFloat, TypeGuard

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import EVERY_STEP, StepRecorder
from stepscope.agent.tensors._capture_losses import LossCapture
from stepscope.agent.tensors._capture_params import PARAM_KINDS, ParamCapture
from stepscope.agent.tensors._collections import Collection
from stepscope.agent.tensors._modules import ModuleTaps, tensors_of
from stepscope.agent.tensors._pending import Pending
from stepscope.agent.tensors._plans import Plan, SavePlanner
from stepscope.agent.tensors._writer import TensorWriter

if TYPE_CHECKING:
    import torch
    from torch import nn
    from torch.utils.hooks import RemovableHandle

    from stepscope.agent._native_hooks import Wrapped
    from stepscope.agent.frameworks._torch_hooks import TorchHooks


def _is_tensor(value: object) -> TypeGuard[torch.Tensor]:
    # Duck-typed: a script that records plain numbers never imports torch for it.
    return hasattr(value, "dim")


class TensorCapture(LossCapture, ParamCapture):
    """One per agent; ``install(hooks)`` once torch is imported, ``remove()`` at exit."""

    def __init__(
        self,
        collections: list[Collection],
        writer: TensorWriter,
        rec: StepRecorder,
        faults: FaultBoundary,
    ) -> None:
        self.collections, self.writer, self.rec, self.faults = collections, writer, rec, faults
        self.pending = Pending()
        self.taps = ModuleTaps(collections, self._take_module)
        self.planner = SavePlanner(collections)
        self.plan = self.planner.plan
        self._names: dict[int, str] = {}
        self._named_roots = -1
        self._loss_names: dict[int, str] = {}
        self._done: tuple[int, set[int]] = (-1, set())
        self._undo: list[Callable[[], None]] = []
        self._hooks: TorchHooks | None = None
        # Armed: some collection saves the current step (train or eval); the step
        # numbers at which the boundary must look again when disarmed.
        self.armed = False
        self._wake = (0, 0)
        self._opt_handle: RemovableHandle | None = None
        # torch's register_optimizer_step_pre_hook, once installed
        self._register_pre_hook: Callable[[Callable[..., None]], RemovableHandle] | None = None
        self._loss_call: tuple[type[nn.Module], Wrapped] | None = None  # _Loss, our wrapper
        self._on_backward_guarded = self._guarded(self._on_backward)
        self._on_optimizer_guarded = self._guarded(self._on_optimizer)

    # -- install / remove -------------------------------------------------------------
    def install(self, hooks: TorchHooks) -> None:
        """Attach to the step hooks, the optimizers, loss modules and step boundaries."""
        import torch
        from torch.nn.modules.loss import _Loss
        from torch.optim import optimizer as optim

        self._hooks = hooks
        self._register_pre_hook = optim.register_optimizer_step_pre_hook
        if "__call__" not in _Loss.__dict__:
            self._loss_call = (_Loss, self._wrap_loss_call(torch.nn.Module.__call__))
        self.rec.listen(self._on_boundary)
        self._undo.append(lambda: self.rec.unlisten(self._on_boundary))
        self._undo.append(lambda: self._arm(False, False))
        self._rearm(self.rec.train_steps, self.rec.eval_steps)

    def remove(self) -> None:
        """Remove every hook and hand over what is still pending."""
        for undo in reversed(self._undo):
            undo()
        self._undo = []
        self.taps.remove()
        self.flush()

    # -- planning -----------------------------------------------------------------------
    def _take(
        self, plan: Plan, kind: str, key: tuple[str, int, str], t: torch.Tensor, alias: str = ""
    ) -> None:
        chosen = [c for c in plan if c.selects(kind, key[2], alias)]
        if not chosen:
            return
        self.rec.poke = True  # hand it over at the next boundary, armed or not
        self.pending.member(chosen, key[2], kind)
        reductions = tuple(dict.fromkeys(r for c in chosen for r in c.reductions))
        self.pending.add(key, t, reductions, any(c.save_raw for c in chosen))

    # -- callbacks ------------------------------------------------------------------------
    def _take_module(
        self, kind: str, module: nn.Module, path: str, alias: str, value: object
    ) -> None:
        import torch

        training = bool(module.training and torch.is_grad_enabled())
        phase = "train" if training else "eval"
        step = self.rec.train_steps if training else self.rec.eval_steps
        plan = self.plan(phase, step)
        for i, t in tensors_of(value):
            self._take(plan, kind, (phase, step, f"{path}_{kind}_{i}"), t, f"{alias}_{kind}_{i}")

    def record_scalar(
        self, name: str, value: SupportsFloat | torch.Tensor, step: int | None, phase: str
    ) -> None:
        """A scalar the script wants kept (always saved, whatever the collections say)."""
        self.rec.poke = True  # hand it over at the next boundary
        if step is None:
            rec = self.rec
            busy = rec.forward or rec.backward or rec.data
            ended = rec.train_steps if phase == "train" else rec.eval_steps
            step = ended if (busy and phase == "train") else max(ended - 1, 0)
        self.pending.members.setdefault("scalars", set()).add(name)
        if _is_tensor(value):
            self.pending.accumulate((phase, step, name), value, "mean")
        else:
            self.pending.add_float((phase, step, name), float(value))

    # -- boundaries -----------------------------------------------------------------------
    def _on_boundary(self, phase: str, step: int, _t: float) -> tuple[int, int]:
        """After a step: hand over the batch; re-plan only when a save is near.

        The recorder counts the step that just ended after its listeners: the
        coming step of ``phase`` is ``step + 1``. Returns the steps from which the
        recorder calls again (every step while armed).
        """
        try:
            if self.pending.filled:
                self.flush()
            rec = self.rec
            train = step + 1 if phase == "train" else rec.train_steps
            evals = step + 1 if phase == "eval" else rec.eval_steps
            if self.armed or train >= self._wake[0] or evals >= self._wake[1]:
                self._rearm(train, evals, phase == "eval")
        except Exception as exc:
            self.faults.record("tensors", exc)
            return EVERY_STEP
        return EVERY_STEP if self.armed else self._wake

    def _rearm(self, train_step: int, eval_step: int, after_eval: bool = False) -> None:
        """Arm the callbacks if the coming steps save; else note when to look again.

        An evaluation step ends when its forward returns, before its loss is
        computed: right after an evaluation boundary, the step that just ended
        counts. Module taps must be in before an evaluation step's forward.
        """
        train = self.plan("train", train_step)
        ended = self.plan("eval", eval_step - 1) if after_eval else ()
        self._arm(bool(train or ended), any(c.kinds & PARAM_KINDS for c in train))
        taps = bool(self.taps.collections)
        if taps:
            want = self.taps.wanted(train) or self.taps.wanted(self.plan("eval", eval_step))
            self.taps.update(want, self._roots())
        self._wake = self.planner.wake(train_step, eval_step, taps)

    def _arm(self, on: bool, params: bool) -> None:
        self.armed = on
        self._wrap_losses(on)
        if self._hooks is not None:
            self._hooks.timers.on_backward_root = self._on_backward_guarded if on else None
        register = self._register_pre_hook
        if params and self._opt_handle is None and register is not None:
            self._opt_handle = register(self._on_optimizer_guarded)
        elif not params and self._opt_handle is not None:
            self._opt_handle.remove()
            self._opt_handle = None

    def flush(self) -> None:
        """Hand what was captured to the writer as one batch."""
        if self.pending:
            pending, self.pending = self.pending, Pending()
            self.writer.put(pending.batch(self.writer.now()))
