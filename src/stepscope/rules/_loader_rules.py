"""DataLoaderWorkers: the loop waits for data because its DataLoader has too few workers.

DataLoading (``_step_rules``) says *that* a rank waits for data; this rule says
*why*, from the DataLoader's settings (the agent's ``dataloader`` events) and the
CPU of the workers (``proc_cpu - proc_cpu_main``, docs/format.md): no workers at
all, or workers each busy near a whole core (saturated). Waiting with idle workers
(slow storage, a lock) is left to DataLoading and IOBottleneck.
"""

from __future__ import annotations

import pandas as pd

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
from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param
from stepscope.rules._types import Finding
from stepscope.rules._windows import severity


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
        Param("worker_cpu_threshold", 80, "median CPU per worker that makes it saturated, %"),
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
            return self._finding(rows, rank, share, what, "set num_workers")
        busy = sample_median(data.system, "proc_cpu", start, end)
        main = sample_median(data.system, "proc_cpu_main", start, end)
        if busy is None or main is None:
            return None  # the workers' CPU is unknown: DataLoading reports the wait
        per_worker = max(busy - main, 0.0) / workers
        if per_worker < float(self.p_float("worker_cpu_threshold")):
            return None
        cpu = sample_median(data.system, "cpu", start, end)
        cores = node_cores(data, {rank: facts})
        idle = cores * (1.0 - cpu / 100.0) if cores and cpu is not None else None
        what = (
            f"while its {facts.workers} worker(s) each used a median {per_worker:.0f}% "
            "of a core (saturated)"
        )
        fix = (
            f"add workers: about {idle:.1f} core(s) idle"
            if idle is not None and idle >= 1.0
            else "make the transforms cheaper: no core is idle"
        )
        return self._finding(rows, rank, share, what, fix)

    def _finding(self, rows: pd.DataFrame, rank: int, share: float, what: str, fix: str) -> Finding:
        threshold = float(self.p_float("threshold"))
        first, last = int(rows["step"].min()), int(rows["step"].max())
        wait = float(rows["data_wait"].sum())
        return Finding(
            f"rank {rank} waited for data {share:.0f}% of its step time (> {threshold:g}%, "
            f"{wait:.1f} s in steps {first}-{last}) {what}; {fix}",
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
