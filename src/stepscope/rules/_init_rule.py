"""The rule on the start of training: MaxInitializationTime.

The time from each process's ``process_start`` event to its rank's first step,
less the time it waited for a CPU core that other work held. An imported rank's
``process_start`` is its timeline's earliest time: the finding says "at least".
"""

from __future__ import annotations

import pandas as pd

from stepscope.analysis.host import run_wait_seconds
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._params import Param
from stepscope.rules._text import versus
from stepscope.rules._types import Finding
from stepscope.rules._windows import severity


class MaxInitializationTime(NodeRule):
    name = "MaxInitializationTime"
    description = "Time from the start of each training process to its first step."
    recommendation = (
        "Shorten the start: cache the dataset or its index, load checkpoints lazily, avoid "
        "downloads at start-up, and check for slow imports or compilation."
    )
    params = (Param("threshold", 20, "initialization time that fires the rule, minutes"),)
    judges_now = True  # a start still waiting for its first step grows with now

    def check(self, data: RuleInput) -> Part:
        starts, since = _starts(data)
        if starts is None:
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
            finding = self._judge(row, first_step, t1, queued, since)
            if finding is not None:
                findings.append(finding)
        # Cost: the slowest rank's start beyond the threshold (value, threshold: minutes).
        over = [60.0 * ((f.value or 0.0) - (f.threshold or 0.0)) for f in findings]
        return Part(findings, len(findings), len(starts), cost_seconds=max(over, default=None))

    def _judge(
        self, row: pd.Series, first_step: float | None, t1: float, queued: float, since: str
    ) -> Finding | None:
        limit = float(self.p_float("threshold")) * 60.0
        t0 = float(row["time"])
        waited = max(t1 - t0 - queued, 0.0)
        if waited <= limit:
            return None
        rank = int(row["rank"])
        what = "took" if first_step is not None else "has no step yet after"
        what += " at least" if since == ESTIMATED else ""
        busy = f" ({queued:.0f} s waiting for a CPU core left out)" if queued >= 1 else ""
        return Finding(
            f"rank {rank} {what} {versus(waited / 60, limit / 60, 'min')} from {since} "
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


# An imported rank's process_start (importers/sagemaker): its timeline's earliest time,
# at or after the real start, so the time measured from it is a lower bound.
ESTIMATED = (
    "the earliest time its imported timeline records (the process's own start is "
    "unknown: a lower bound)"
)


def _starts(data: RuleInput) -> tuple[pd.DataFrame | None, str]:
    """Each process's start (``process_start`` events) and what it is called; in an
    imported job without any, the job's start for each rank with steps, as the report's
    Initialization takes it (analysis/report_data.py ``lifecycle``)."""
    ev = data.events
    starts = ev[ev["kind"] == "process_start"] if len(ev) else ev
    if len(starts):
        estimated = starts["detail"].astype(str).str.contains("estimated_from", regex=False)
        return starts, ESTIMATED if bool(estimated.all()) else "process start"
    begin = data.meta.get("start_time")
    # Only an import lacks them by nature; a recorded job's live scan may have
    # dropped them from its buffer (first_steps covers that), and an agent that
    # could not read its start left it unknown.
    if data.meta.get("status") != "Imported" or not begin or not len(data.steps):
        return None, ""
    firsts = data.steps.groupby(["node", "rank"], as_index=False)["start"].min()
    rows = pd.DataFrame({"node": firsts["node"], "rank": firsts["rank"], "time": float(begin)})
    return rows, "the job's start (its processes' starts were not recorded)"
