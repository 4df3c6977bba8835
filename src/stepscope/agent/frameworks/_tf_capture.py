"""Output tensors of a TensorFlow/Keras job, in the same collections and files as torch's.

The collections, their save schedules and the writer are the agent's
(:class:`~stepscope.agent.tensors.TensorCapture`'s planner and writer); only the
taking differs. What is taken, on saving steps only (``armed``):

* ``loss``: in Keras step functions the batch's loss as Keras' ``loss`` tracker
  receives it (carried out of the compiled step by :mod:`._tf_stash`), else the
  ``loss`` of the logs; in custom loops the target of an eager
  ``GradientTape.gradient`` (summed over the step), or what a compiled train
  function returns when it is a scalar or a dict with ``loss``;
* metrics: the other scalars of a Keras step's logs (the ``metrics`` collection);
* weights and biases (``trainable_variables`` before the update in eager custom
  loops, after it at the end of a compiled step) and gradients (at an eager
  ``apply``; from a compiled step, the side variables of :mod:`._tf_stash`).

Values are read to numpy on the training thread (``.numpy()`` waits for the
step's result); reductions are computed in numpy. Nothing imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import EVERY_STEP, StepRecorder
from stepscope.agent.frameworks._tf_stash import GraphStash
from stepscope.agent.frameworks._tf_values import Host, reduce, to_numpy, var_name
from stepscope.agent.tensors import StepBatch, TensorCapture
from stepscope.agent.tensors._pending import KIND_COLLECTION
from stepscope.jobfolder import VALUE_KEY

if TYPE_CHECKING:
    from stepscope.agent.tensors._plans import Plan

Row = tuple[str, int, str, str]
_PARAM_KINDS = frozenset({"weight", "bias", "gradient"})


class TFCapture:
    """Takes a TF job's tensors; built from the agent's :class:`TensorCapture`."""

    def __init__(self, capture: TensorCapture, rec: StepRecorder, faults: FaultBoundary) -> None:
        self.planner, self.writer, self.rec, self.faults = (
            capture.planner,
            capture.writer,
            rec,
            faults,
        )
        self.armed = False  # the coming training step saves something
        self.armed_eval = False  # the coming evaluation step does
        self.variables: Iterable[object] = ()  # a compiled train function's, from its trace
        self._keys: list[Row] = []
        self._values: list[float] = []
        self._raws: list[tuple[str, int, str, npt.NDArray[np.generic]]] = []
        self._members: dict[str, set[str]] = {}
        self._loss: list[float] = []
        self._wake = (0, 0)
        self.stash = GraphStash(self.planner)

    def install(self) -> None:
        self.rec.listen(self._on_boundary)
        self._rearm(self.rec.train_steps, self.rec.eval_steps)

    def remove(self) -> None:
        self.rec.unlisten(self._on_boundary)
        self.armed = self.armed_eval = False
        self.flush()

    # -- planning ------------------------------------------------------------------------
    def _on_boundary(self, phase: str, step: int, _t: float) -> tuple[int, int]:
        """After a step: hand over what was taken; arm each phase for its next step if
        that step saves, else ask to be called again at its next saving step."""
        try:
            self.flush()
            train = step + 1 if phase == "train" else self.rec.train_steps
            evals = step + 1 if phase == "eval" else self.rec.eval_steps
            self._rearm(train, evals)
        except Exception as exc:
            self.faults.record("tensors", exc)
            return EVERY_STEP
        return self._wake

    def _rearm(self, train: int, evals: int) -> None:
        plan = self.planner
        self.armed = bool(plan.plan("train", train))
        self.armed_eval = bool(plan.plan("eval", evals))
        # The recorder calls again once a phase's step reaches these numbers: the
        # coming step itself while armed (to disarm after it), else its next save.
        self._wake = (
            train if self.armed else plan.next_saving("train", train),
            evals if self.armed_eval else plan.next_saving("eval", evals),
        )
        # Compiled steps copy their gradients out only on steps that save some.
        self.stash.arm(any("gradient" in c.kinds for c in plan.plan("train", train)))

    def _phase_step(self, training: bool) -> tuple[str, int]:
        return ("train", self.rec.train_steps) if training else ("eval", self.rec.eval_steps)

    # -- taking ----------------------------------------------------------------------------
    def take(self, plan: Plan, kind: str, key: tuple[str, int, str], value: object) -> None:
        """Keep ``value`` (a tensor, variable or number) in the collections that want it."""
        chosen = [c for c in plan if c.selects(kind, key[2])]
        if not chosen:
            return
        x = to_numpy(value)
        if x is None:
            return
        for c in chosen:
            self._members.setdefault(c.name, set()).add(key[2])
        self._members.setdefault(KIND_COLLECTION[kind], set()).add(key[2])
        # A value, as torch's 0-dim tensors; a (1,)-shaped bias or gradient gets its
        # reductions (a value would stand for every reduction, abs_mean included).
        if x.ndim == 0 or (x.size == 1 and kind == "loss"):
            self._keys.append((*key, VALUE_KEY))
            self._values.append(float(x.reshape(())))
            return
        for r in dict.fromkeys(r for c in chosen for r in c.reductions):
            self._keys.append((*key, r))
            self._values.append(reduce(x, r))
        if any(c.save_raw for c in chosen):
            self._raws.append((*key, np.array(value.numpy() if hasattr(value, "numpy") else x)))

    def scalar(self, plan: Plan, key: tuple[str, int, str], value: object) -> None:
        """A metric beside the loss, kept on the steps that save the loss."""
        x = to_numpy(value)
        if x is not None and x.size == 1 and any(c.selects("loss", "loss") for c in plan):
            self._members.setdefault("metrics", set()).add(key[2])
            self._keys.append((*key, VALUE_KEY))
            self._values.append(float(x.reshape(())))

    def on_logs(self, training: bool, logs: object, model: object) -> None:
        """A Keras step function's logs (``loss`` and metrics), then its weights and
        the gradients its compiled step copied out."""
        phase, step = self._phase_step(training)
        plan = self.planner.plan(phase, step)
        if not plan or not isinstance(logs, Mapping):
            return
        batch = self.stash.losses.get("train" if training else "test")
        self._logs(plan, (phase, step), logs, batch)
        if training:
            self.on_variables(plan, step, getattr(model, "trainable_variables", ()))
            self._stashed(plan, step)

    def _logs(
        self, plan: Plan, at: tuple[str, int], logs: Mapping[object, object], loss: object
    ) -> None:
        for name, value in logs.items():
            if name == "loss":  # the batch's own loss when known, not the epoch's mean
                self.take(plan, "loss", (*at, "loss"), value if loss is None else loss)
            else:
                self.scalar(plan, (*at, str(name)), value)

    def on_function_output(self, out: object) -> None:
        """What a compiled custom train step returned: its loss, if it says which."""
        phase, step = self._phase_step(True)
        plan = self.planner.plan(phase, step)
        if not plan:
            return
        if isinstance(out, Mapping):
            self._logs(plan, (phase, step), out, None)
        else:
            x = to_numpy(out)
            if x is not None and x.size == 1:
                self.take(plan, "loss", (phase, step, "loss"), out)
        self.on_variables(plan, step, self.variables)
        self._stashed(plan, step)

    def _stashed(self, plan: Plan, step: int) -> None:
        if any("gradient" in c.kinds for c in plan):
            for name, slot in self.stash.written():
                self.take(plan, "gradient", ("train", step, name), slot)

    def on_gradients(self, grads: object, variables: object) -> None:
        """An eager ``apply`` inside a Keras step (``run_eagerly=True``): its gradients."""
        phase, step = self._phase_step(True)
        plan = self.planner.plan(phase, step)
        if isinstance(grads, list | tuple) and isinstance(variables, list | tuple):
            for g, v in zip(grads, variables, strict=False):
                if g is not None:
                    self.take(plan, "gradient", (phase, step, f"gradient/{var_name(v)}"), g)

    def on_loss(self, target: object) -> None:
        """The target of an eager ``GradientTape.gradient``: the step's loss."""
        x = to_numpy(target)
        if x is not None and x.size == 1:
            self._loss.append(float(x.reshape(())))

    def on_apply(self, grads: object, variables: object) -> None:
        """An eager optimizer step: the loss so far, the variables before the update."""
        phase, step = self._phase_step(True)
        plan = self.planner.plan(phase, step)
        if not plan:
            self._loss = []
            return
        if self._loss:
            self.take(plan, "loss", (phase, step, "loss"), sum(self._loss))
            self._loss = []
        if not any(c.kinds & _PARAM_KINDS for c in plan) or not isinstance(variables, list | tuple):
            return
        self.on_variables(plan, step, variables)
        grads = list(grads) if isinstance(grads, list | tuple) else []
        for g, v in zip(grads, variables, strict=False):
            if g is not None:
                self.take(plan, "gradient", (phase, step, f"gradient/{var_name(v)}"), g)

    def on_variables(self, plan: Plan, step: int, variables: Iterable[object]) -> None:
        if not any(c.kinds & _PARAM_KINDS for c in plan):
            return
        for v in variables:
            name = var_name(v)
            kind = "bias" if name.rsplit("/", 1)[-1].startswith("bias") else "weight"
            self.take(plan, kind, ("train", step, name), v)

    def flush(self) -> None:
        """Hand what was taken to the writer as one batch."""
        if not (self._keys or self._raws or self._members):
            return
        batch = StepBatch(
            time=self.writer.now(),  # the agent's clock: the job's timeline
            keys=self._keys,
            values=Host(self._values),  # type: ignore[arg-type]  # HostVector's duck
            raws=self._raws,
            members=self._members,
        )
        self._keys, self._values, self._raws, self._members = [], [], [], {}
        self.writer.put(batch)
