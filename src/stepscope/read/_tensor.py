"""One named tensor across steps: ``job.tensors[name]`` (:mod:`stepscope.read._tensors`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from stepscope.jobfolder import VALUE_KEY
from stepscope.read._decode import TensorValue, np_reduce

if TYPE_CHECKING:
    from stepscope.read._tensors import Tensors


class Tensor:
    """One named tensor across steps."""

    def __init__(self, tensors: Tensors, name: str) -> None:
        self.tensors, self.name = tensors, name

    def __repr__(self) -> str:
        return f"<Tensor {self.name!r}>"

    def steps(self, phase: str | None = None) -> list[int]:
        """The steps at which anything of this tensor was saved (of ``phase`` if given)."""
        return self.tensors.steps_of(self.name, phase)

    def _phase(self, step: int, phase: str | None) -> str:
        if phase is not None:
            return phase
        return "train" if step in self.steps("train") else "eval"

    def value(self, step: int, phase: str | None = None) -> TensorValue:
        """The tensor at ``step``: a numpy array, or a float for a scalar (a loss).

        ``phase`` None means training if saved there, else evaluation.
        """
        phase = self._phase(step, phase)
        rows = self.tensors.index([self.name], phase, step)
        if len(rows):
            return self.tensors.load(rows.iloc[-1])
        scalars = self.tensors.scalars([self.name], phase, step)
        own = scalars[scalars["key"] == VALUE_KEY]
        if len(own):
            return float(own["value"].iloc[-1])
        stored = sorted(set(scalars["key"]))
        raise KeyError(
            f"No value of {self.name!r} at {phase} step {step}"
            + (f"; only reductions {stored}" if stored else "")
            + f". Saved steps: {self.steps(phase)[:20]}."
        )

    def reduction(self, step: int, name: str, phase: str | None = None) -> float:
        """Reduction ``name`` at ``step``: the one saved, else computed from the raw tensor."""
        phase = self._phase(step, phase)
        scalars = self.tensors.scalars([self.name], phase, step)
        hit = scalars[scalars["key"] == name]
        if len(hit):
            return float(hit["value"].iloc[-1])
        return np_reduce(np.asarray(self.value(step, phase)), name)

    def reductions(self, step: int, phase: str | None = None) -> dict[str, float]:
        """Every reduction saved at ``step``."""
        phase = self._phase(step, phase)
        scalars = self.tensors.scalars([self.name], phase, step)
        rows = scalars[scalars["key"] != VALUE_KEY]
        return {str(k): float(v) for k, v in zip(rows["key"], rows["value"], strict=True)}

    def values(self, phase: str = "train") -> dict[int, TensorValue]:
        """``{step: value}`` for every saved step of ``phase``."""
        out: dict[int, TensorValue] = {}
        scalars = self.tensors.scalars([self.name], phase)
        own = scalars[scalars["key"] == VALUE_KEY]
        out.update({int(s): float(v) for s, v in zip(own["step"], own["value"], strict=True)})
        index = self.tensors.index([self.name], phase)
        for _, row in index.iterrows():
            out[int(row["step"])] = self.tensors.load(row)
        return dict(sorted(out.items()))
