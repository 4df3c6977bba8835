"""The tensors captured during a step, until the step boundary hands them over.

Everything here stays on the device: 0-dim results are gathered and copied in
one batch by :meth:`Pending.batch`; raw tensors were copied when captured.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from stepscope.agent.tensors._reduce import reduce, scalar, stack_to_host, to_host
from stepscope.agent.tensors._writer import StepBatch
from stepscope.jobfolder import VALUE_KEY

if TYPE_CHECKING:
    import torch

    from stepscope.agent.tensors._collections import Collection

Key = tuple[str, int, str]  # phase, step, name
KIND_COLLECTION = {
    "loss": "losses",
    "weight": "weights",
    "bias": "biases",
    "gradient": "gradients",
    "input": "inputs",
    "output": "outputs",
    "optimizer": "optimizer_variables",
}


class Pending:
    """One step's captured tensors (or a few, when a boundary comes late)."""

    def __init__(self) -> None:
        self.values: list[torch.Tensor] = []  # 0-dim, on their devices
        self.keys: list[tuple[str, int, str, str]] = []
        self.raws: list[tuple[str, int, str, torch.Tensor]] = []  # host copies
        self.floats: list[tuple[str, int, str, float]] = []
        self.accum: dict[Key, tuple[str, list[torch.Tensor]]] = {}
        self.members: dict[str, set[str]] = {}
        # Set by every method that keeps a value: read at every step boundary, where
        # an attribute costs less than ``__bool__``'s call.
        self.filled = False

    def __bool__(self) -> bool:
        return self.filled

    def member(self, collections: Iterable[Collection], name: str, kind: str | None = None) -> None:
        """Note ``name`` in ``collections`` and in the built-in collection of its kind."""
        for c in collections:
            self.members.setdefault(c.name, set()).add(name)
        if kind is not None:
            self.members.setdefault(KIND_COLLECTION[kind], set()).add(name)

    def add(self, key: Key, t: torch.Tensor, reductions: tuple[str, ...], raw: bool) -> None:
        """A tensor: its value if it is a scalar, else reductions and/or a host copy."""
        self.filled = self.filled or t.dim() == 0 or bool(reductions) or raw
        if t.dim() == 0:
            self.values.append(scalar(t))
            self.keys.append((*key, VALUE_KEY))
            return
        if reductions:
            self.values += reduce(t, reductions)
            self.keys += [(*key, r) for r in reductions]
        if raw:
            self.raws.append((*key, to_host(t)))

    def accumulate(self, key: Key, t: torch.Tensor, how: str) -> None:
        """A scalar seen several times in a step (``sum`` of backward roots, ``mean``
        of a loss module's outputs)."""
        self.accum.setdefault(key, (how, []))[1].append(scalar(t))
        self.filled = True

    def add_float(self, key: Key, value: float) -> None:
        self.floats.append((*key, float(value)))
        self.filled = True

    def batch(self, now: float) -> StepBatch:
        """Everything as one batch at ``now`` (the agent's clock); the device values are
        stacked and copied once."""
        import torch

        for key, (how, items) in self.accum.items():
            stacked = torch.stack(
                [t.to(torch.float64) if t.device.type != "mps" else t for t in items]
            )
            self.values.append(stacked.sum() if how == "sum" else stacked.mean())
            self.keys.append((*key, VALUE_KEY))
        values = stack_to_host(self.values)
        return StepBatch(
            time=now,
            keys=self.keys,
            values=values,
            raws=self.raws,
            floats=self.floats,
            members=self.members,
        )
