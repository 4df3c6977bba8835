"""Output tensor capture: collections, capture hooks, reductions and the writer.

Importing this package imports no torch; :class:`TensorCapture` imports it when
installed. See docs/tensors.md for the user's view and docs/format.md for the files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, SupportsFloat

from stepscope.agent.tensors._capture import TensorCapture
from stepscope.agent.tensors._collections import KINDS, RULE_COLLECTIONS, Collection, resolve
from stepscope.agent.tensors._writer import StepBatch, TensorWriter

if TYPE_CHECKING:
    import torch

__all__ = [
    "KINDS",
    "RULE_COLLECTIONS",
    "Collection",
    "StepBatch",
    "TensorCapture",
    "TensorWriter",
    "record_scalar",
    "resolve",
]


def record_scalar(
    name: str, value: SupportsFloat | torch.Tensor, step: int | None = None, phase: str = "train"
) -> None:
    """Keep a scalar (accuracy, learning rate, ...) beside the loss, in the job's tensors.

    ``value`` is a number or a one-element tensor (read in the step's batch, never
    synchronised here). ``step`` defaults to the training step in progress, or the
    one that just ended when called between steps (after ``optimizer.step()``);
    ``phase`` is ``"train"`` or ``"eval"``. Does nothing without a running agent.
    """
    if phase not in ("train", "eval"):
        raise ValueError(f"Invalid phase {phase!r} for record_scalar. Accepted: 'train', 'eval'.")
    from stepscope.agent import bootstrap

    agent = bootstrap.current()
    capture = getattr(agent, "tensors", None)
    if capture is None:
        return
    try:
        capture.record_scalar(str(name), value, step, phase)
    except Exception as exc:
        agent.faults.record("tensors", exc)  # type: ignore[union-attr]
