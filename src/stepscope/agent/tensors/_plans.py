"""Which collections save a step, and the next step worth looking at again.

The capture asks for the plan of a step in its callbacks (memoised per step) and,
at step boundaries, when a phase next saves: until then its per-step callbacks
stay disarmed (docs/tensors.md, BENCHMARKS.md).
"""

from __future__ import annotations

import sys

from stepscope.agent.tensors._collections import Collection

Plan = tuple[Collection, ...]


class SavePlanner:
    """The save schedules of a job's collections."""

    def __init__(self, collections: list[Collection]) -> None:
        self.collections = collections
        self._plans: dict[tuple[str, int], Plan] = {}

    def plan(self, phase: str, step: int) -> Plan:
        """The collections that save step ``step`` of ``phase`` (memoised per step)."""
        key = (phase, step)
        found = self._plans.get(key)
        if found is None:
            if len(self._plans) > 16:
                self._plans.clear()
            found = self._plans[key] = tuple(c for c in self.collections if c.saves(phase, step))
        return found

    def next_saving(self, phase: str, step: int) -> int:
        """The first step at or after ``step`` that some collection saves (maxsize: none)."""
        found = [c.schedules[phase].next_save(step) for c in self.collections]
        return min((s for s in found if s is not None), default=sys.maxsize)

    def wake(self, train_step: int, eval_step: int, taps: bool) -> tuple[int, int]:
        """The training and evaluation step numbers at which to plan again.

        An evaluation step's loss comes after its boundary: the capture must be
        armed once the saving step has ended (``+ 1``); module taps must be in
        before its forward (the step itself).
        """
        evals = self.next_saving("eval", eval_step)
        return (
            self.next_saving("train", train_step),
            evals if taps and evals > eval_step else evals + 1,
        )
