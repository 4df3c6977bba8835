"""The rule on steps: StepOutlier (MaxInitializationTime: ``_init_rule``).

Step windows are aligned by step number (steps ``[k*w, (k+1)*w)`` of a rank and
phase), so each step belongs to one window and is reported at most once; so are
StepOutlier's blocks of neighbours (:mod:`stepscope.analysis.outliers`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis import outliers as out
from stepscope.analysis.profiled import LEFT_OUT, cap_profiled
from stepscope.jobfolder import JsonObject
from stepscope.rules import _step_contention as host
from stepscope.rules._cost import step_seconds
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._params import Param, min_cost_s, min_cost_share
from stepscope.rules._text import waiting_reason
from stepscope.rules._types import Finding
from stepscope.rules._windows import severity


def skip_steps(default: int) -> Param:
    return Param("skip_steps", default, "first steps of each rank and phase ignored", int)


class StepOutlier(NodeRule):
    """Steps much slower (or faster) than their neighbours: :mod:`stepscope.analysis.outliers`."""

    name = "StepOutlier"
    description = (
        "Steps much slower (or faster) than the steps around them of their rank and phase."
    )
    recommendation = (
        "Look at what happened during the outlier steps: checkpointing, evaluation, "
        "garbage collection, a data-loader stall, or another job on the machine."
    )
    params = (
        Param(
            "stddev",
            out.Definition.stddev,
            "multiple of the robust standard deviation (1.4826 MAD) that makes a step an outlier",
            minimum=1.0,
        ),
        Param(
            "mode",
            "both",
            "steps judged: train, eval or both",
            str,
            choices=("train", "eval", "both"),
        ),
        Param("n_outliers", 10, "outliers tolerated before the rule fires", int),
        Param("min_excess_s", out.Definition.min_excess_s, "least distance from the baseline, s"),
        skip_steps(out.Definition.skip_steps),
        Param(
            "window",
            out.Definition.window,
            "steps around a step whose median is its baseline",
            int,
            minimum=5,
        ),
        Param(
            "contention_threshold",
            25,
            "other processes' CPU (% of the node) during an outlier that flags it as taken "
            "under host contention (HostContention's others_threshold)",
        ),
        min_cost_share(),
        min_cost_s(0.5),
    )

    def tolerated(self) -> int:
        return int(self.p_int("n_outliers"))

    def below_text(self, triggers: int, findings: list[Finding]) -> str:
        return f"{triggers} outlier step(s), within the {self.tolerated()} tolerated"

    def check(self, data: RuleInput) -> Part:
        # Only the steps a window could have slowed are left out (analysis.profiled);
        # only the columns read here are copied (a day-long job has 10^5-10^6 steps).
        steps = every = cap_profiled(_columns(data.steps), data.events)
        if self.p_str("mode") != "both" and len(steps):
            steps = steps[steps["phase"] == self.p_str("mode")]
        judged = self.judge(steps) if len(steps) else steps
        if not len(judged):
            return Part(na_reason=self._waiting(every))
        flagged = judged[judged["outlier"].to_numpy()]
        flagged = flagged.assign(
            others=host.others_cpu(data, flagged), waited=host.core_wait(data, flagged)
        )
        # Excused only for the wait inside it beyond a usual step's (the baseline holds
        # that): explained by contention when what is left of its excess is no outlier;
        # else it counts, with that wait taken off its cost.
        extra = (flagged["waited"] - host.usual_wait(data, judged)).clip(lower=0.0)
        left = flagged["excess"].abs() - extra.fillna(0.0)
        flagged = flagged.assign(extra=extra)
        explained = (left < self._margin(flagged["sigma"])).to_numpy()
        columns = ("phase", "step", "rank", "node", "start", "end", "duration", "excess", "sigma")
        cores = host.node_cores(data, flagged)
        findings = [
            self._finding(*row, cores=cores)
            for row in zip(
                *(flagged[c] for c in (*columns, "others", "waited", "extra")), strict=True
            )
        ]
        counted = judged.drop(index=flagged.index[explained]) if explained.any() else judged
        kept = flagged.index[~explained]
        counted.loc[kept, "excess"] = np.sign(flagged.loc[kept, "excess"]) * left[kept].clip(0)
        # The ranks of a job run side by side: the slowest rank's loss is the job's.
        cost = max(out.cost_by_rank(counted).values(), default=0.0)
        contended = int((flagged["others"] >= self.p_float("contention_threshold")).sum())
        details: JsonObject = {"contended_outliers": contended} if contended else {}
        if explained.any():
            details["explained_by_contention"] = int(explained.sum())
        if profiled := self._profiled(steps):
            details[LEFT_OUT] = profiled
        triggers = len(findings) - int(explained.sum())
        total = step_seconds(steps)
        return Part(findings, triggers, len(judged), details, cost_seconds=cost, step_seconds=total)

    def _margin(self, sigma: pd.Series | float) -> pd.Series | float:
        """The least excess of an outlier (:mod:`stepscope.analysis.outliers`)."""
        k, least = float(self.p_float("stddev")), float(self.p_float("min_excess_s"))
        return np.maximum(k * sigma, least)

    def _profiled(self, steps: pd.DataFrame) -> int:
        """The steps past ``skip_steps`` left out as profiled."""
        if "profiled" not in steps:
            return 0
        marked = steps["profiled"].fillna(False).to_numpy(dtype=bool)
        return int((marked & (steps["step"].to_numpy() >= self.p_int("skip_steps"))).sum())

    def _waiting(self, steps: pd.DataFrame) -> str:
        """What is true when nothing is judged: no steps, only skipped or profiled ones."""
        mode = self.p_str("mode")
        what = "steps" if mode == "both" else f"{mode} steps"
        if mode != "both" and len(steps):
            steps = steps[steps["phase"] == mode]
        if len(steps) and (steps["step"] >= self.p_int("skip_steps")).any():
            skip = self.p_int("skip_steps")
            return f"every {what} after the first {skip} was inside or slowed by a profiling window"
        newest = int(steps["step"].max()) if len(steps) else None
        return waiting_reason(what, newest, self.p_int("skip_steps"))

    def judge(self, steps: pd.DataFrame) -> pd.DataFrame:
        """``steps`` judged by :func:`stepscope.analysis.outliers.judge_steps` with this
        rule's parameters."""
        definition = out.Definition(
            stddev=float(self.p_float("stddev")),
            min_excess_s=float(self.p_float("min_excess_s")),
            window=self.p_int("window"),
            skip_steps=self.p_int("skip_steps"),
        )
        return out.judge_steps(steps, definition)

    def _finding(
        self,
        phase: str,
        step: int,
        rank: int,
        node: str,
        start: float,
        end: float,
        d: float,
        excess: float,
        sigma: float,
        others: float,
        waited: float,
        extra: float,
        *,
        cores: float | None,
    ) -> Finding:
        base, k = d - excess, float(self.p_float("stddev"))
        margin = float(self._margin(sigma))
        z = abs(excess) / sigma
        side = "more" if excess > 0 else "less"
        limit = float(self.p_float("contention_threshold"))
        during = host.host_text(excess, margin, others, waited, extra, cores=cores, threshold=limit)
        return Finding(
            f"{phase} step {step} of rank {rank} took {d:.3f} s, {abs(excess):.3f} s {side} "
            f"than the median of the steps around it ({base:.3f} s; {z:.1f} robust "
            f"standard deviations of {sigma:.3f} s){during}",
            self.recommendation,
            severity(z, k, 4 * k),
            node=str(node),
            rank=int(rank),
            start=float(start),
            end=float(end),
            steps=(int(step), int(step)),
            value=float(d),
            threshold=base + margin if excess > 0 else base - margin,
        )


_READ = ("rank", "node", "pid", "phase", "step", "start", "end", "duration", "profiled")


def _columns(steps: pd.DataFrame) -> pd.DataFrame:
    """The columns of ``steps`` StepOutlier reads (a view until one is changed)."""
    return steps[[c for c in _READ if c in steps]]
