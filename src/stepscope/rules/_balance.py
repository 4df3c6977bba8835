"""LoadBalancing: every pair of GPUs of a node, and every rank of the job, compared.

The original rule compared too few pairs; this one compares all of them in
each window: for GPUs, the mean utilization of every pair ``(i, j)``; for ranks
(multi-process jobs), the median of a step column of every rank (the slowest
against the fastest bounds every pair), across all nodes; a rank finding names
the node of each rank. A rank persistently slower than the median of its peers
is the Straggler rule's (straggler.py).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import Part
from stepscope.rules._params import Param, patience, window
from stepscope.rules._reduce import Groups
from stepscope.rules._straggler_scope import split, why
from stepscope.rules._system_base import SystemRule, lasted
from stepscope.rules._text import versus
from stepscope.rules._train_frame import train_rows
from stepscope.rules._types import Finding, RuleResult
from stepscope.rules._windows import Hit, node_gpus, run_finding, runs, window_index

RANKS = "_rank_medians"
STEP_COLUMNS = ("duration", "data_wait", "forward", "backward", "optimizer", "other")
MIN_SECONDS = 1e-3  # medians below this are noise, never compared


def imbalance(high: float, low: float) -> float:
    """``(high - low) / high``: 0 when equal, 1 when one side does nothing."""
    return (high - low) / high if high > 0 else 0.0


class LoadBalancing(SystemRule):
    name = "LoadBalancing"
    description = "Work is unevenly spread over the GPUs of a node or the ranks of the job."
    recommendation = (
        "Balance the work: equal batch sizes and data shards per rank (DistributedSampler), "
        "the same model placement on every GPU, and no extra work (logging, evaluation) on "
        "one rank only."
    )
    params = (
        Param("threshold", 0.5, "imbalance (high - low) / high that fires the rule, 0-1", float),
        patience(10),
        window(500),
        Param(
            "rank_metric",
            "forward",
            "step column compared between ranks",
            str,
            choices=STEP_COLUMNS,
        ),
    )
    needs_gpu = False

    def check(self, data: RuleInput) -> Part:
        enough = len(node_gpus(data)) > 1
        part = super().check(data) if enough else Part(na_reason="fewer than 2 GPUs")
        part.details[RANKS] = self._rank_medians(data)
        return part

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        # One groupby for all GPUs (pandas' compensated means), then numpy per pair.
        means = framed.groupby("win")[[f"gpu{g}_util" for g in gpus]].mean().to_numpy()
        w, hits = self.windows_of(framed), []
        for i, j in combinations(range(len(gpus)), 2):
            a, b = means[:, i], means[:, j]
            high, low = np.maximum(a, b), np.minimum(a, b)
            value = np.where(high > 0, (high - low) / np.where(high > 0, high, 1.0), 0.0)
            hits += w.hits(f"gpu{gpus[i]}-gpu{gpus[j]}", value, value > self.p_float("threshold"))
        return hits

    def finding(self, node: str, run: list[Hit]) -> Finding:
        value, threshold = max(h.value for h in run), self.p_float("threshold")
        text = (
            f"{run[0].key} on {node}: utilization differs by "
            f"{versus(value * 100, threshold * 100, '%')} of the busier GPU for {lasted(run)}"
        )
        return run_finding(
            text, self.recommendation, run, value, threshold, 1.0, node=node, device=run[0].key
        )

    def _rank_medians(self, data: RuleInput) -> pd.DataFrame:
        """Per (window, rank): median of ``rank_metric`` over training steps."""
        steps, metric = data.steps, self.p_str("rank_metric")
        if len(steps):  # only the columns read: a day-long node has 10^5-10^6 steps
            read = steps[[c for c in ("rank", "node", "start", "end", metric) if c in steps]]
            steps = read.iloc[train_rows(steps, self.p_int("patience"))]
        if not len(steps):
            return pd.DataFrame(columns=["win", "rank", "value", "start", "end", "node"])
        width = self.p_int("window") * data.interval_s()
        g = Groups(window_index(steps["start"], data.start(), width), steps["rank"].to_numpy())
        frame = {
            "win": g.keys[0],
            "rank": g.keys[1],
            "value": g.median(steps[metric].to_numpy()),
            "start": g.min(steps["start"].to_numpy()),
            "end": g.max(steps["end"].to_numpy()),
            "node": g.first(steps["node"]),
        }
        return pd.DataFrame(frame)

    def combine(self, parts: list[Part], data: RuleInput) -> RuleResult:
        medians = [p.details.pop(RANKS) for p in parts if RANKS in p.details]
        frames = [m for m in medians if isinstance(m, pd.DataFrame) and len(m)]
        ranks = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        # Collectives the agent cannot time (TensorFlow workers): a rank waiting for a
        # slower one shows the wait in forward; such a column names the waiting rank.
        _, skipped = split(data.meta, [self.p_str("rank_metric")])
        if len(ranks) and ranks["rank"].nunique() > 1 and not skipped:
            hits = self._rank_hits(ranks)
            found = runs(hits)
            nodes = {int(r): str(n) for r, n in zip(ranks["rank"], ranks["node"], strict=True)}
            findings = [self._rank_finding(r, nodes) for r in found]
            parts = [*parts, Part(findings, sum(map(len, found)), len(ranks))]
        elif all(p.na_reason for p in parts):
            reason = "needs at least 2 GPUs on a node or 2 ranks; this job has neither"
            reason = f"fewer than 2 GPUs on a node; ranks {why(skipped)}" if skipped else reason
            parts = [Part(na_reason=reason)]
        return super().combine(parts, data)

    def _rank_hits(self, ranks: pd.DataFrame) -> list[Hit]:
        hits = []
        for win, group in ranks.groupby("win"):
            group = group[group["value"] >= MIN_SECONDS]
            if len(group) < 2:
                continue
            slow, fast = group.loc[group["value"].idxmax()], group.loc[group["value"].idxmin()]
            value = imbalance(float(slow["value"]), float(fast["value"]))
            if value > self.p_float("threshold"):
                key = f"rank {int(slow['rank'])} vs rank {int(fast['rank'])}"
                start, end = float(group["start"].min()), float(group["end"].max())
                hits.append(Hit(key, int(str(win)), start, end, value))
        return hits

    def _rank_finding(self, run: list[Hit], nodes: dict[int, str]) -> Finding:
        value, threshold = max(h.value for h in run), self.p_float("threshold")
        words = run[0].key.split()
        slow, fast = int(words[1]), int(words[-1])
        metric = self.p_str("rank_metric")
        text = (
            f"rank {slow} (node {nodes.get(slow)}) vs rank {fast} (node {nodes.get(fast)}): "
            f"median {metric} differs by {versus(value * 100, threshold * 100, '%')} of the "
            f"slower rank for {lasted(run)}"
        )
        return run_finding(
            text,
            self.recommendation,
            run,
            value,
            threshold,
            1.0,
            node=nodes.get(slow),
            rank=slow,
            device=run[0].key,
        )
