"""Waiting for data: DataLoading, that a rank waits (DataLoaderWorkers says why:
``_loader_rules``).

DataLoading judges windows of steps aligned by step number (steps ``[k*w, (k+1)*w)``
of a rank), so each step is reported at most once. On a GPU it counts a step's data
wait only up to the device idle within the step (``rules._device``). What feeding the
loop faster would save is its cost bounded by the idle cores (``rules._saving``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.jobfolder import JsonObject
from stepscope.rules._cpu_facts import node_cores, rank_facts, skip_steps
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._params import Param, window
from stepscope.rules._reduce import Groups
from stepscope.rules._saving import autogroup_of, bounded, idle_core_bound
from stepscope.rules._text import versus, waiting_reason
from stepscope.rules._train_frame import rows_with_waited, train_frame, train_rows
from stepscope.rules._types import Finding
from stepscope.rules._windows import Hit, runs, share_finding

READ = ("rank", "node", "step", "start", "end", "duration", "data_wait")  # copied: no more
WAIT_ALLOWANCE = 0.05  # share of step time a well-fed loop still waits (DataLoading's cost)


class DataLoading(NodeRule):
    name = "DataLoading"
    reads_train_frame = True
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
        every = train_frame(data)  # shared with the other step rules: never changed
        rows = train_rows(every, self.p_int("skip_steps")) if len(every) else np.zeros(0, int)
        known = every["data_wait"].notna().to_numpy()[rows] if len(rows) else rows.astype(bool)
        if len(rows) and not known.any():  # never measured (an import)
            return Part(na_reason="the data wait of the steps was not recorded (unknown, not 0)")
        # the columns read, on a GPU with what the device waited for
        steps = rows_with_waited(every, rows[known], READ, "data_wait")
        if not len(steps):
            newest = int(every["step"].max()) if len(every) else None
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
        by_rank = excess.groupby(level=0).sum()
        worst = by_rank.idxmax()
        cost = float(by_rank.max())
        saving, why = self._saving(data, rows.loc[[worst]], cost)
        details: JsonObject = {"saving_bound": why} if why else {}
        return Part(findings, len(rows), int(n[judged].sum()), details, cost_seconds=cost,
                    saving_seconds=saving)  # fmt: skip

    @staticmethod
    def _saving(data: RuleInput, rows: pd.DataFrame, cost: float) -> tuple[float, str | None]:
        """What feeding the loop faster saves of one rank's firing windows: their wait
        above the allowance, at most the idle cores' bound over them (a wait spent
        decoding on the training thread needs the cores more workers would use)."""
        span = float(rows["start"].min()), float(rows["end"].max())
        facts = rank_facts(data.events)
        usable = min((f.affinity for f in facts.values() if f.affinity), default=None)
        times = float(rows["total"].sum()), float(rows["wait"].sum())
        cores, grouped = node_cores(data, facts), autogroup_of(data)
        bound = idle_core_bound(data.system, span, times, cores, usable, grouped)
        return bounded(cost, bound)

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
            "node": g.first(steps["node"]),
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
