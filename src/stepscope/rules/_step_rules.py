"""Rules on steps and events: StepOutlier, DataLoading, MaxInitializationTime.

Step windows are aligned by step number (steps ``[k*w, (k+1)*w)`` of a rank and
phase), so each step belongs to one window and is reported at most once; so are
StepOutlier's blocks of neighbours (:mod:`stepscope.analysis.outliers`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis import outliers as out
from stepscope.rules._base import NodeRule, Part
from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param, window
from stepscope.rules._reduce import Groups
from stepscope.rules._text import versus, waiting_reason
from stepscope.rules._types import Finding
from stepscope.rules._windows import Hit, runs, severity


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
    )

    def tolerated(self) -> int:
        return int(self.p_int("n_outliers"))

    def check(self, data: RuleInput) -> Part:
        steps = data.steps
        if self.p_str("mode") != "both" and len(steps):
            steps = steps[steps["phase"] == self.p_str("mode")]
        judged = self.judge(steps) if len(steps) else steps
        if not len(judged):
            return Part(na_reason=self._waiting(data.steps))
        flagged = judged[judged["outlier"].to_numpy()]
        columns = ("phase", "step", "rank", "node", "start", "end", "duration", "excess", "sigma")
        findings = [self._finding(*row) for row in zip(*(flagged[c] for c in columns), strict=True)]
        # The ranks of a job run side by side: the slowest rank's loss is the job's.
        cost = max(out.cost_by_rank(judged).values(), default=0.0)
        return Part(findings, len(findings), len(judged), cost_seconds=cost)

    def _waiting(self, steps: pd.DataFrame) -> str:
        """What is true when nothing is judged: no steps, only skipped or profiled ones."""
        mode = self.p_str("mode")
        what = "steps" if mode == "both" else f"{mode} steps"
        if mode != "both" and len(steps):
            steps = steps[steps["phase"] == mode]
        if len(steps) and (steps["step"] >= self.p_int("skip_steps")).any():
            return f"every {what} after the first {self.p_int('skip_steps')} was profiled"
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
    ) -> Finding:
        base, k = d - excess, float(self.p_float("stddev"))
        margin = max(k * sigma, float(self.p_float("min_excess_s")))
        z = abs(excess) / sigma
        side = "more" if excess > 0 else "less"
        return Finding(
            f"{phase} step {step} of rank {rank} took {d:.3f} s, {abs(excess):.3f} s {side} "
            f"than the median of the steps around it ({base:.3f} s; {z:.1f} robust "
            f"standard deviations of {sigma:.3f} s)",
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


WAIT_ALLOWANCE = 0.05  # share of step time a well-fed loop still waits (DataLoading's cost)


class DataLoading(NodeRule):
    name = "DataLoading"
    description = "Training steps spend a large share of their time waiting for the next batch."
    recommendation = (
        "Feed the loop faster: DataLoader(num_workers=N) with N up to the free CPU cores, "
        "pin_memory=True on GPU, a larger prefetch_factor, persistent_workers=True, and "
        "cheaper transforms or pre-processed data."
    )
    params = (
        Param("threshold", 20, "share of step time in data_wait that fires the rule, %"),
        Param("min_wait_s", 0.002, "least mean data wait per step that fires the rule, seconds"),
        Param("min_steps", 10, "fewest steps in a window for it to be judged", int, minimum=1),
        skip_steps(1),
        window(1000, "steps"),
    )

    def check(self, data: RuleInput) -> Part:
        train = data.steps[data.steps["phase"] == "train"] if len(data.steps) else data.steps
        steps = train[train["step"] >= self.p_int("skip_steps")] if len(train) else train
        if not len(steps):
            newest = int(train["step"].max()) if len(train) else None
            return Part(
                na_reason=waiting_reason("training steps", newest, self.p_int("skip_steps"))
            )
        table = self._windows(steps)
        n = table["n"].to_numpy()
        judged = n >= self.p_int("min_steps")
        if not judged.any():
            return Part(na_reason=f"fewer than {self.p_int('min_steps')} training steps to judge")
        wait, total = table["wait"].to_numpy()[judged], table["total"].to_numpy()[judged]
        share = wait / np.where(total > 0, total, np.nan) * 100.0  # in the sums' dtype
        share = np.where(np.isnan(share), 0.0, share)
        # A large share of a tiny wait (0.1 ms of a 0.4 ms step) costs nothing worth a finding.
        per_step = wait / n[judged]
        fired = (share > self.p_float("threshold")) & (per_step >= self.p_float("min_wait_s"))
        if not fired.any():  # the usual case: no DataFrame work
            return Part([], 0, int(n[judged].sum()))
        rows = table[judged][fired].assign(share=share[fired])
        hits = [Hit(str(r), int(w), 0.0, 0.0, 0.0) for r, w in rows.index]
        findings = [
            self._finding(rows.loc[[(int(run[0].key), h.win) for h in run]]) for run in runs(hits)
        ]
        # Cost: the firing windows' wait above the allowance, of the worst rank of the node.
        excess = (rows["wait"] - WAIT_ALLOWANCE * rows["total"]).clip(lower=0.0)
        cost = float(excess.groupby(level=0).sum().max())
        return Part(findings, len(rows), int(n[judged].sum()), cost_seconds=cost)

    def _windows(self, steps: pd.DataFrame) -> pd.DataFrame:
        """Per (rank, window): data wait and step time, steps, span and node."""
        win = steps["step"] // self.p_int("window")
        # pandas' float32 sums (compensated), as ever; the rest with numpy (cheaper).
        sums = steps.groupby([steps["rank"], win])[["data_wait", "duration"]].sum()
        g = Groups(steps["rank"].to_numpy(), win.to_numpy())
        step = steps["step"].to_numpy()
        columns = {
            "wait": sums["data_wait"].to_numpy(),
            "total": sums["duration"].to_numpy(),
            "n": g.counts,
            "start": g.min(steps["start"].to_numpy()),
            "end": g.max(steps["end"].to_numpy()),
            "first": g.min(step),
            "last": g.max(step),
            "node": g.first(steps["node"].to_numpy()),
        }
        return pd.DataFrame(columns, index=sums.index)

    def _finding(self, rows: pd.DataFrame) -> Finding:
        share, threshold = float(rows["share"].max()), float(self.p_float("threshold"))
        rank = int(rows.index[0][0])
        first, last = int(rows["first"].min()), int(rows["last"].max())
        return Finding(
            f"rank {rank} waited for data {versus(share, threshold, '%')} of its step time "
            f"in steps {first}-{last}",
            self.recommendation,
            severity(share, threshold, 100.0),
            node=str(rows["node"].iloc[0]),
            rank=rank,
            start=float(rows["start"].min()),
            end=float(rows["end"].max()),
            steps=(first, last),
            value=share,
            threshold=threshold,
        )


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
            finding = self._judge(row, first.get(int(row["rank"])), min(float(end), data.now))
            if finding is not None:
                findings.append(finding)
        # Cost: the slowest rank's start beyond the threshold (value, threshold: minutes).
        over = [60.0 * ((f.value or 0.0) - (f.threshold or 0.0)) for f in findings]
        return Part(findings, len(findings), len(starts), cost_seconds=max(over, default=None))

    def _judge(self, row: pd.Series, first_step: float | None, now: float) -> Finding | None:
        limit = float(self.p_float("threshold")) * 60.0
        t0 = float(row["time"])
        waited = (first_step if first_step is not None else now) - t0
        if waited <= limit:
            return None
        rank = int(row["rank"])
        what = "took" if first_step is not None else "has no step yet after"
        return Finding(
            f"rank {rank} {what} {versus(waited / 60, limit / 60, 'min')} from process start "
            "to its first step",
            self.recommendation,
            severity(waited, limit, 3 * limit),
            node=str(row["node"]),
            rank=rank,
            start=t0,
            end=t0 + waited,
            value=waited / 60,
            threshold=limit / 60,
        )
