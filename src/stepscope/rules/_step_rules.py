"""Rules on steps and events: StepOutlier, MaxInitializationTime.

Step windows are aligned by step number (steps ``[k*w, (k+1)*w)`` of a rank and
phase), so each step belongs to one window and is reported at most once; so are
StepOutlier's blocks of neighbours (:mod:`stepscope.analysis.outliers`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis import outliers as out
from stepscope.analysis.diagnosis_text import cpu_text
from stepscope.analysis.downsample import FloatArray
from stepscope.analysis.host import others_during, run_wait_in, run_wait_seconds
from stepscope.analysis.profiled import LEFT_OUT, cap_profiled
from stepscope.jobfolder import JsonObject
from stepscope.rules._cost import step_seconds
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._params import Param, min_cost_share
from stepscope.rules._text import versus, waiting_reason
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
    )

    def tolerated(self) -> int:
        return int(self.p_int("n_outliers"))

    def below_text(self, triggers: int, findings: list[Finding]) -> str:
        return f"{triggers} outlier step(s), within the {self.tolerated()} tolerated"

    def check(self, data: RuleInput) -> Part:
        # Only the steps a window could have slowed are left out (analysis.profiled).
        steps = every = cap_profiled(data.steps, data.events)
        if self.p_str("mode") != "both" and len(steps):
            steps = steps[steps["phase"] == self.p_str("mode")]
        judged = self.judge(steps) if len(steps) else steps
        if not len(judged):
            return Part(na_reason=self._waiting(every))
        flagged = judged[judged["outlier"].to_numpy()]
        flagged = flagged.assign(
            others=self._others(data, flagged), waited=self._waited(data, flagged)
        )
        # Excused only for the wait inside it beyond a usual step's (the baseline holds
        # that): explained by contention when what is left of its excess is no outlier;
        # else it counts, with that wait taken off its cost.
        extra = (flagged["waited"] - self._usual_wait(data, judged)).clip(lower=0.0)
        left = flagged["excess"].abs() - extra.fillna(0.0)
        flagged = flagged.assign(extra=extra)
        explained = (left < self._margin(flagged["sigma"])).to_numpy()
        columns = ("phase", "step", "rank", "node", "start", "end", "duration", "excess", "sigma")
        cores = _cores(data, flagged)
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

    def _usual_wait(self, data: RuleInput, judged: pd.DataFrame) -> float:
        """The median wait for a core of the steps that are no outliers (0: unknown)."""
        usual = judged[~judged["outlier"].to_numpy()]
        waits = self._waited(data, usual) if len(usual) else np.full(0, np.nan)
        known = waits[np.isfinite(waits)]
        return float(np.median(known)) if len(known) else 0.0

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

    def _others(self, data: RuleInput, flagged: pd.DataFrame) -> FloatArray:
        """Other processes' CPU (% of the node) during each flagged step: NaN unknown."""
        if not len(flagged) or not len(data.system):
            return np.full(len(flagged), np.nan)
        starts, ends = flagged["start"].to_numpy(np.float64), flagged["end"].to_numpy(np.float64)
        return others_during(data.system, starts, ends, _cores(data, flagged))

    @staticmethod
    def _waited(data: RuleInput, flagged: pd.DataFrame) -> FloatArray:
        """Seconds each flagged step's rank waited, runnable, for a core inside the step
        (NaN: unknown): its threads' run-queue wait over the sampling intervals the step
        overlaps, cut at its ends (:func:`~stepscope.analysis.host.run_wait_in`), over
        the node's ranks (their processes' waits are summed). A stall spent asleep
        waits for no core: it is not excused."""
        if not len(flagged):
            return np.full(0, np.nan)
        starts, ends = flagged["start"].to_numpy(np.float64), flagged["end"].to_numpy(np.float64)
        ranks = max(1, int(data.steps["rank"].nunique()))  # the node's ranks share the sum
        return run_wait_in(data.system, starts, ends) / ranks

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
        # Flagged, not dropped: the step was slow all the same, but the host may be why.
        busy = others >= self.p_float("contention_threshold")  # False when NaN
        used = cpu_text(others, cores, 0)  # CPU in one unit: % of the node (cores)
        host = f"; other processes used {used} of the node's CPU meanwhile" if busy else ""
        # ``extra``: its wait beyond a usual step's (the baseline holds that); NaN unknown
        usual = f" ({extra:.3f} s more than a usual step)" if extra < waited else ""
        if abs(excess) - extra < margin:  # False when NaN
            host += f"; it waited {waited:.3f} s for a core: host contention, not counted"
        elif extra >= 0.1 * abs(excess):
            left = abs(excess) - extra
            host += f"; it waited {waited:.3f} s for a core{usual}, its own {left:.3f} s counted"
        return Finding(
            f"{phase} step {step} of rank {rank} took {d:.3f} s, {abs(excess):.3f} s {side} "
            f"than the median of the steps around it ({base:.3f} s; {z:.1f} robust "
            f"standard deviations of {sigma:.3f} s){host}",
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


def _cores(data: RuleInput, flagged: pd.DataFrame) -> float | None:
    """The cores of the flagged steps' node (None: unknown)."""
    if not len(flagged):
        return None
    info = data.nodes.get(str(flagged["node"].iloc[0]), {})
    return float(info.get("cpu_count") or 0) or None


class MaxInitializationTime(NodeRule):
    name = "MaxInitializationTime"
    description = "Time from the start of each training process to its first step."
    recommendation = (
        "Shorten the start: cache the dataset or its index, load checkpoints lazily, avoid "
        "downloads at start-up, and check for slow imports or compilation."
    )
    params = (Param("threshold", 20, "initialization time that fires the rule, minutes"),)

    def check(self, data: RuleInput) -> Part:
        ev = data.events
        starts = ev[ev["kind"] == "process_start"] if len(ev) else ev
        if not len(starts):
            return Part(na_reason="no process_start event: the start of the processes is unknown")
        end = data.meta.get("end_time") or data.now
        steps = data.steps.groupby("rank")["start"].min() if len(data.steps) else pd.Series()
        first = {int(r): float(t) for r, t in steps.items()}
        for rank, t in data.first_steps.items():  # live: the first steps left the buffer
            first[rank] = min(first.get(rank, t), t)
        findings = []
        for _, row in starts.iterrows():
            first_step = first.get(int(row["rank"]))
            t1 = first_step if first_step is not None else min(float(end), data.now)
            # waiting for a core (another process's work) is not this start's:
            # shared by the node's processes that started together
            queued = run_wait_seconds(data.system, float(row["time"]), t1) / len(starts)
            finding = self._judge(row, first_step, t1, queued)
            if finding is not None:
                findings.append(finding)
        # Cost: the slowest rank's start beyond the threshold (value, threshold: minutes).
        over = [60.0 * ((f.value or 0.0) - (f.threshold or 0.0)) for f in findings]
        return Part(findings, len(findings), len(starts), cost_seconds=max(over, default=None))

    def _judge(
        self, row: pd.Series, first_step: float | None, t1: float, queued: float
    ) -> Finding | None:
        limit = float(self.p_float("threshold")) * 60.0
        t0 = float(row["time"])
        waited = max(t1 - t0 - queued, 0.0)
        if waited <= limit:
            return None
        rank = int(row["rank"])
        what = "took" if first_step is not None else "has no step yet after"
        busy = f" ({queued:.0f} s waiting for a CPU core left out)" if queued >= 1 else ""
        return Finding(
            f"rank {rank} {what} {versus(waited / 60, limit / 60, 'min')} from process start "
            f"to its first step{busy}",
            self.recommendation,
            severity(waited, limit, 3 * limit),
            node=str(row["node"]),
            rank=rank,
            start=t0,
            end=t1,
            value=waited / 60,
            threshold=limit / 60,
        )
