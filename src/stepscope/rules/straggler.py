"""Straggler: ranks persistently slower than their peers, named with their node.

Windows are aligned by step number (steps ``[k*w, (k+1)*w)``), the same for
every rank, so they mean the same steps on every node whatever the clocks say.
In each window, each rank's median of a step column is compared with the
median of its peers' medians; a rank that is worse by ``threshold`` times (and
by ``min_excess_s``) in ``patience`` consecutive windows is a straggler.

Under DDP, ranks wait for each other inside ``backward`` (the gradient
all-reduce): the fast ranks show the straggler's delay as backward time, and
``duration`` is the same for all. The agent measures that wait (the step's
``collective`` column), so ``busy`` (``duration - collective``: the step time
a rank spends on its own work) is where a slow rank shows whatever part of
the step it is slow in, while its peers show the wait as ``collective``.
``busy`` is the catch-all: a rank already named by a specific column (data
wait, forward, optimizer, the rest) is not named again for it. In jobs whose
ranks do not wait for each other, or written before ``collective`` existed,
``busy`` is ``duration``. ``backward`` still names the waiting ranks and is
not compared by default. docs/distributed.md. Where the agent cannot time the
collectives (TensorFlow workers), only the columns that hold no wait for a peer
are judged (``_straggler_scope``).
"""

from __future__ import annotations

import pandas as pd

from stepscope.analysis.profiled import LEFT_OUT, profiled_text
from stepscope.errors import RuleConfigError
from stepscope.rules._base import Rule
from stepscope.rules._cost import on_cost, step_seconds
from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param, min_cost_s, min_cost_share, window
from stepscope.rules._straggler_advice import advice, has_gpu
from stepscope.rules._straggler_scope import drop_waiting, split, unmeasured, why
from stepscope.rules._straggler_windows import (
    METRICS,
    judged_steps,
    slower,
    specific_first,
    waited_for,
    window_medians,
)
from stepscope.rules._text import num, waiting_reason
from stepscope.rules._types import Finding, RuleResult, Status
from stepscope.rules._windows import Hit, runs, severity

DEFAULT_METRICS = "data_wait,forward,optimizer,other,busy"
LABEL = {"busy": "busy time (step time outside collectives)"}


class Straggler(Rule):
    name = "Straggler"
    description = "Ranks whose steps are persistently slower than those of their peers."
    recommendation = (
        "Every rank waits for the slowest at each collective: fix or replace the straggler. "
        "Compare its node's system metrics with the others', balance its data shard, and "
        "drain a node that stays slow."
    )
    frames = ("steps",)  # judges steps only: never load the wide system frame
    params = (
        Param(
            "threshold",
            1.5,
            "a rank's median as a multiple of its peers' median that makes it slower",
            minimum=1.0,
        ),
        Param("min_excess_s", 0.005, "least excess over the peers' median, seconds"),
        Param(
            "patience", 3, "consecutive slower windows before a rank is reported", int, minimum=1
        ),
        window(20, "steps"),
        Param("skip_steps", 5, "first training steps of each rank ignored", int),
        Param("metrics", DEFAULT_METRICS, f"step columns compared, of {', '.join(METRICS)}", str),
        min_cost_share(),
        min_cost_s(0.5),
    )

    def __init__(self, name: str | None = None, **parameters: object) -> None:
        super().__init__(name, **parameters)
        bad = [m for m in self.metrics() if m not in METRICS]
        if bad or not self.metrics():
            raise RuleConfigError(
                f"Invalid metrics {self.p_str('metrics')!r} for rule {self.rule_name}: expected "
                f"a comma-separated list of {', '.join(METRICS)} (default {DEFAULT_METRICS})."
            )

    def metrics(self) -> list[str]:
        return [m.strip() for m in str(self.p_str("metrics")).split(",") if m.strip()]

    def evaluate(self, data: RuleInput) -> RuleResult:
        steps, profiled = judged_steps(data.steps, data.events, self.p_int("skip_steps"))
        ranks = steps["rank"].nunique() if len(steps) else 0
        if ranks < 2:
            return self.not_applicable(data, self._waiting(data.steps))
        judged, skipped = split(data.meta, self.metrics())
        if not judged:
            return self.not_applicable(data, why(skipped))
        medians = window_medians(steps, self.p_int("window"))
        found = self._found(medians, judged, data, float(self.p_float("min_excess_s")))
        gpu = has_gpu(data)
        findings = [self._finding(run, medians, gpu) for run in found]
        status = Status.ISSUES_FOUND if findings else Status.NO_ISSUES_FOUND
        triggers = sum(len(run) for run in found)
        message = (
            f"{len(findings)} straggler finding(s); worst: "
            f"{max(findings, key=lambda f: f.severity).message}"
            if findings
            else f"No straggler among {ranks} ranks in {len(steps)} steps."
        )
        details: dict[str, object] = {"ranks": ranks}
        if not found:  # under min_excess_s (a small model's ms): fires on cost alone
            found = self._found(medians, judged, data, 0.0)
            below = [self._finding(run, medians, gpu) for run in found]
            lost = waited_for(found, medians)
            share = self.cost_share(lost, step_seconds(steps))
            if below and share is not None and lost:
                what = f"{len(below)} straggler finding(s) under min_excess_s"
                fired, text = on_cost(what, lost, share, below)
                message = text if fired else message
                if fired:
                    findings, triggers, status = below, 0, Status.ISSUES_FOUND
                    details["fired_on_cost"] = True
        cost = waited_for(found, medians)
        if status is Status.ISSUES_FOUND and (least := self.too_little(cost)) is not None:
            # its peers lost less than min_cost_s in all: a real pattern, too small to act on
            status, details["below_min_cost_s"] = Status.NO_ISSUES_FOUND, True
            message = f"{message.rstrip('.')}; but in all it costs {cost:.2f} s (< {least:g} s)"
        message += f"; {why(skipped)}" if skipped else ""
        if profiled_text(profiled):
            message += f" ({profiled_text(profiled)})"
        details |= {"windows": int(medians.index.get_level_values(0).nunique())}
        if profiled:
            details[LEFT_OUT] = profiled
        if skipped:
            details["not_judged"] = skipped
        return self.result(
            status,
            data,
            findings=findings,
            triggers=triggers,
            datapoints=len(steps),
            message=message,
            details=details,
            cost_seconds=cost,
        )

    def _found(
        self, medians: pd.DataFrame, judged: list[str], data: RuleInput, floor: float
    ) -> list[list[Hit]]:
        """The runs of at least ``patience`` slower windows, excess over ``floor``."""
        threshold = float(self.p_float("threshold"))
        hits = [h for m in judged for h in slower(medians, m, threshold, floor)]
        hits = drop_waiting(hits) if unmeasured(data.meta) else hits
        return specific_first([run for run in runs(hits) if len(run) >= self.p_int("patience")])

    def _waiting(self, steps: pd.DataFrame) -> str:
        """Why fewer than 2 ranks are judged: what is true of the job's steps."""
        train = steps[steps["phase"] == "train"] if len(steps) else steps
        ranks = train["rank"].nunique() if len(train) else 0
        if ranks < 2:
            return f"needs training steps of at least 2 ranks; {ranks} rank(s) recorded so far"
        newest = int(train["step"].max())
        return waiting_reason("training steps", newest, self.p_int("skip_steps"))

    def _finding(self, run: list[Hit], medians: pd.DataFrame, gpu: bool) -> Finding:
        rank_s, metric = run[0].key.split("|")
        rank = int(rank_s)
        wins = [h.win for h in run]
        mine = medians.xs(rank, level="rank").loc[wins]
        others = medians.drop(index=rank, level="rank")
        peers = others[others.index.get_level_values("win").isin(wins)][metric].median()
        node = str(mine["node"].iloc[0])
        ratio = min(h.value for h in run)  # held in every window of the run
        threshold = float(self.p_float("threshold"))
        waits = ""
        if metric == "busy":
            theirs = others[others.index.get_level_values("win").isin(wins)]["collective"]
            waits = (
                f" (at collectives its peers waited a median {theirs.median():.3f} s per "
                f"step, it {mine['collective'].median():.3f} s)"
            )
        return Finding(
            f"{LABEL.get(metric, metric)} of rank {rank} on node {node} makes it a straggler: "
            f"median {mine[metric].median():.3f} s against {peers:.3f} s for its peers (at "
            f"least {num(ratio, threshold)}x, > {threshold:g}x) in "
            f"{len(run)} consecutive windows of {self.p_int('window')} steps{waits}; "
            f"{advice(metric, gpu)}",
            self.recommendation,
            severity(ratio, threshold, 4 * threshold),
            node=node,
            rank=rank,
            start=run[0].start,
            end=run[-1].end,
            steps=(int(mine["first"].min()), int(mine["last"].max())),
            value=ratio,
            threshold=threshold,
        )
