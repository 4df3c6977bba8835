"""PythonOverhead: the training thread spends its steps outside the model's work.

A step's ``other`` (docs/format.md) is its time outside the data wait, the forwards,
``backward()`` and ``optimizer.step()``: the loss when computed outside the model,
``zero_grad``, logging, ``.item()``/``.cpu()`` that wait for the device, metrics,
Python between the calls. Judged per rank in windows of ``window`` steps on the
median step, so one slow step (a checkpoint: StepOutlier's) neither fires the rule
nor hides it; stalls (over 3x the median) are left out of the cost too.

On a GPU (steps with device parts, ``rules._device``) ``other`` is overhead only
while the device idled: a step's overhead is its ``other`` up to the device idle
within the step, since host Python that overlaps queued kernels costs nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.jobfolder import STEP_PARTS, JsonObject
from stepscope.rules._cost import step_seconds
from stepscope.rules._cpu_facts import min_steps, skip_steps
from stepscope.rules._device import device_steps, waited_on
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._params import Param, min_cost_share, window
from stepscope.rules._train_frame import train_frame, typical_rows
from stepscope.rules._types import Finding
from stepscope.rules._windows import Hit, runs, share_finding


class PythonOverhead(NodeRule):
    name = "PythonOverhead"
    reads_train_frame = True
    description = (
        "Training steps spend a large median share of their time outside data wait, forward, "
        "backward and optimizer: Python, logging, synchronisations."
    )
    recommendation = (
        "Profile a window of steps (stepscope profile JOB --python cprofile) and move the work off "
        "the step: log and call .item()/.cpu() every N steps, not every step; compute the "
        "loss inside the model's forward; zero_grad(set_to_none=True); no per-step "
        "checkpoints, prints or metric syncs."
    )
    params = (
        Param("threshold", 30, "median share of step time in 'other' that fires the rule, %"),
        Param("min_other_s", 0.005, "least median 'other' (on a GPU: device idle) per step, s"),
        Param("allowance", 5, "share of each step's time in 'other' not counted as cost, %"),
        min_steps(),
        skip_steps(5),
        window(1000, "steps"),
        min_cost_share(),
    )

    def check(self, data: RuleInput) -> Part:
        frame = train_frame(data)  # shared with the other step rules: never changed
        rows = typical_rows(frame, self.p_int("skip_steps"))
        steps = frame.iloc[rows[:0]]
        if len(rows):  # a part not measured (an imported job's optimizer) hides in 'other'
            measured = frame[list(STEP_PARTS)].notna().to_numpy().all(axis=1)[rows]
            if not measured.any():  # known before any copy of the steps (an import)
                return Part(na_reason="a part of the steps was not measured: 'other' holds it")
            steps = frame.iloc[rows[measured]]
            steps = steps.assign(overhead=waited_on(steps, ("other",)))
        if len(steps) < self.p_int("min_steps"):
            return Part(na_reason=f"fewer than {self.p_int('min_steps')} training steps to judge")
        steps = steps.assign(win=steps["step"] // self.p_int("window"))
        hits: list[Hit] = []
        judged, floored = 0, 0
        for (rank, win), rows in steps.groupby(["rank", "win"], sort=True):
            if len(rows) < self.p_int("min_steps"):
                continue  # too few steps for a median (a window's tail)
            judged += len(rows)
            share, other = self._medians(rows)
            if share > self.p_float("threshold"):
                # Under the floor (a small model's few ms): found, not counted; it fires
                # only on cost (min_cost_share of the step time: NodeRule.combine).
                floored += other < self.p_float("min_other_s")
                start, end = float(rows["start"].min()), float(rows["end"].max())
                hits.append(Hit(str(rank), int(str(win)), start, end, share))
        if not judged:
            return Part(na_reason=f"no window of {self.p_int('min_steps')} training steps yet")
        findings, costs = [], dict[str, float]()
        for run in runs(hits):
            wins = [h.win for h in run]
            rows = steps[(steps["rank"] == int(run[0].key)) & steps["win"].isin(wins)]
            cost = self._cost(rows)
            costs[run[0].key] = costs.get(run[0].key, 0.0) + cost
            findings.append(self._finding(rows, cost))
        on_device = device_steps(steps)
        details: JsonObject = {"device_steps": on_device} if on_device else {}
        if floored:
            details["under_floor_windows"] = floored
        return Part(
            findings,
            len(hits) - floored,
            judged,
            details,
            cost_seconds=max(costs.values(), default=None),
            step_seconds=step_seconds(steps),
        )

    def below_text(self, triggers: int, findings: list[Finding]) -> str:
        floor = float(self.p_float("min_other_s")) * 1000
        return f"{len(findings)} finding(s) with a median 'other' under the {floor:g} ms floor"

    @staticmethod
    def _medians(rows: pd.DataFrame) -> tuple[float, float]:
        """The median share of overhead in a step (%) and the median overhead (s)."""
        other = rows["overhead"].to_numpy(np.float64)
        total = rows["duration"].to_numpy(np.float64)
        share = np.divide(other, total, out=np.zeros_like(other), where=total > 0)
        return float(np.median(share) * 100.0), float(np.median(other))

    def _cost(self, rows: pd.DataFrame) -> float:
        """Seconds of overhead above the allowance, summed over the steps."""
        allowance = float(self.p_float("allowance")) / 100.0
        excess = rows["overhead"].to_numpy(np.float64) - allowance * rows["duration"].to_numpy(
            np.float64
        )
        return float(np.clip(excess, 0.0, None).sum())

    def _finding(self, rows: pd.DataFrame, cost: float) -> Finding:
        share, other = self._medians(rows)
        step = float(rows["duration"].median())
        threshold = float(self.p_float("threshold"))
        rank = int(rows["rank"].iloc[0])
        first, last = int(rows["step"].min()), int(rows["step"].max())
        idle = " with the GPU idle" if device_steps(rows) else ""
        return share_finding(
            f"rank {rank} spent a median {share:.0f}% of its training step (> {threshold:g}%; "
            f"{other * 1000:.1f} ms of {step * 1000:.1f} ms) outside data wait, forward, "
            f"backward and optimizer{idle} in steps {first}-{last}: about {cost:.1f} s in all",
            self.recommendation,
            rows,
            rank,
            (first, last),
            share,
            threshold,
        )
