"""Waiting for data: DataLoading (that a rank waits) and DataLoaderWorkers (why).

DataLoading judges windows of steps aligned by step number (steps ``[k*w, (k+1)*w)``
of a rank), so each step is reported at most once. DataLoaderWorkers says *why*,
from the DataLoader's settings (the agent's ``dataloader`` events) and the CPU of
the workers (``proc_cpu - proc_cpu_main``, docs/format.md): no workers at all, or
workers each busy near a whole core (saturated). Waiting with idle workers (slow
storage, a lock) is left to DataLoading and IOBottleneck.

On a GPU both count a step's data wait only up to the device idle within the step
(``rules._device``): while the device works through queued kernels, a host that
waits for its next batch costs nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis.diagnosis_text import cpu_text
from stepscope.rules._base import NodeRule, Part
from stepscope.rules._cpu_facts import (
    RankFacts,
    min_steps,
    node_cores,
    rank_facts,
    sample_median,
    skip_steps,
    train_steps,
)
from stepscope.rules._device import with_waited
from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param, window
from stepscope.rules._reduce import Groups
from stepscope.rules._text import versus, waiting_reason
from stepscope.rules._types import Finding
from stepscope.rules._windows import Hit, runs, share_finding


class DataLoaderWorkers(NodeRule):
    name = "DataLoaderWorkers"
    description = (
        "Training steps wait for data while the DataLoader has no workers, or while its "
        "workers are each busy near a whole core."
    )
    recommendation = (
        "With num_workers=0, set DataLoader(num_workers=N) (N up to the idle cores); with "
        "saturated workers, add workers while cores are idle, else make the transforms "
        "cheaper (decode once, pre-process offline, vectorise, smaller images)."
    )
    params = (
        Param("threshold", 20, "share of typical step time in data_wait that fires the rule, %"),
        Param("worker_cpu_threshold", 50, "median CPU per worker that makes it saturated, %"),
        min_steps(),
        skip_steps(5),
    )

    def check(self, data: RuleInput) -> Part:
        facts = rank_facts(data.events)
        known = {r: f for r, f in facts.items() if f.workers is not None}
        if not known:
            return Part(na_reason="no dataloader event: the DataLoader's settings are unknown")
        steps = train_steps(data.steps, self.p_int("skip_steps"))
        steps = steps[steps["rank"].isin(list(known))] if len(steps) else steps
        steps = steps[steps["data_wait"].notna()] if len(steps) else steps  # unknown: not 0
        steps = with_waited(steps, "data_wait")  # on a GPU: what the device waited for
        if len(steps) < self.p_int("min_steps"):
            return Part(na_reason=f"fewer than {self.p_int('min_steps')} training steps to judge")
        workers = sum(f.workers or 0 for f in known.values())  # every rank's, on this node
        findings, costs = [], []
        for rank in sorted(int(r) for r in steps["rank"].unique()):
            rows = steps[steps["rank"] == rank]
            finding = self._judge(data, rank, rows, known[rank], workers)
            if finding is not None:
                findings.append(finding)
                costs.append(float(rows["data_wait"].sum()))
        return Part(findings, len(findings), len(steps), cost_seconds=max(costs, default=None))

    def _judge(
        self, data: RuleInput, rank: int, rows: pd.DataFrame, facts: RankFacts, workers: int
    ) -> Finding | None:
        total = float(rows["duration"].sum())
        share = float(rows["data_wait"].sum()) / total * 100.0 if total > 0 else 0.0
        threshold = float(self.p_float("threshold"))
        if share <= threshold:
            return None
        start, end = float(rows["start"].min()), float(rows["end"].max())
        if not facts.workers:
            what = "with num_workers=0: every batch is made on the training thread"
            fix = "set DataLoader(num_workers=N), N up to the idle cores"
            return self._finding(rows, rank, share, what, fix)
        busy = sample_median(data.system, "proc_cpu", start, end)
        main = sample_median(data.system, "proc_cpu_main", start, end)
        if busy is None:  # no process CPU at all (an imported job): judge against the cores
            return self._few_workers(data, rank, rows, facts, share, (start, end))
        if main is None:
            return None  # the workers' CPU is unknown: DataLoading reports the wait
        per_worker = max(busy - main, 0.0) / workers
        if per_worker < float(self.p_float("worker_cpu_threshold")):
            return None
        cpu = sample_median(data.system, "cpu", start, end)
        cores = node_cores(data, {rank: facts})
        idle = cores * (1.0 - cpu / 100.0) if cores and cpu is not None else None
        each = cpu_text(per_worker / cores, cores, 0) if cores else f"{per_worker / 100:.2f} core"
        what = f"while its {facts.workers} worker(s) each used a median {each} (saturated)"
        fix = (
            f"add workers: about {idle:.1f} core(s) idle"
            if idle is not None and idle >= 1.0
            else "make the transforms cheaper: no core is idle"
        )
        return self._finding(rows, rank, share, what, fix)

    def _few_workers(
        self,
        data: RuleInput,
        rank: int,
        rows: pd.DataFrame,
        facts: RankFacts,
        share: float,
        span: tuple[float, float],
    ) -> Finding | None:
        """Without the workers' CPU: too few workers for the idle cores (the predecessor's
        Dataloader finding); silent when the cores are busy or their use unknown."""
        cpu = sample_median(data.system, "cpu", *span)
        cores = node_cores(data, {rank: facts})
        if not cores or cpu is None or not facts.workers or facts.workers >= cores:
            return None
        idle = cores * (1.0 - cpu / 100.0)
        if idle < 1.0:
            return None
        what = (
            f"with {facts.workers} worker(s) on {cores} cores, about {idle:.1f} idle (the "
            "workers' own CPU was not recorded)"
        )
        return self._finding(rows, rank, share, what, "add workers, up to the idle cores")

    def _finding(self, rows: pd.DataFrame, rank: int, share: float, what: str, fix: str) -> Finding:
        threshold = float(self.p_float("threshold"))
        first, last = int(rows["step"].min()), int(rows["step"].max())
        wait = float(rows["data_wait"].sum())
        return share_finding(
            f"rank {rank} waited for data {share:.0f}% of its step time (> {threshold:g}%, "
            f"{wait:.1f} s in steps {first}-{last}) {what}; {fix}",
            self.recommendation,
            rows,
            rank,
            (first, last),
            share,
            threshold,
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
        if len(steps) and steps["data_wait"].isna().all():  # never measured (an import)
            return Part(na_reason="the data wait of the steps was not recorded (unknown, not 0)")
        steps = steps[steps["data_wait"].notna()] if len(steps) else steps
        steps = with_waited(steps, "data_wait")  # on a GPU: what the device waited for
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
        return share_finding(
            f"rank {rank} waited for data {versus(share, threshold, '%')} of its step time "
            f"in steps {first}-{last}",
            self.recommendation,
            rows,
            rank,
            (first, last),
            share,
            threshold,
        )
