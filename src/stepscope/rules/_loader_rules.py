"""Waiting for data: DataLoaderWorkers says why a rank waits (DataLoading, that it
waits: ``_data_loading``), from the DataLoader's settings (the agent's
``dataloader`` events) and the CPU of the workers (``proc_cpu - proc_cpu_main``,
docs/format.md): no workers at all, or workers each busy near a whole core, running
or waiting for one (``proc_pool_run_wait``: saturated). Waiting with idle workers (slow
storage, a lock) is left to DataLoading and IOBottleneck.

What more workers would save is the wait bounded by the idle cores and their fair
share of busy ones (``_saving``): they move the loader's work, they do not remove it.

On a GPU it counts a step's data wait only up to the device idle within the step
(``rules._device``): while the device works through queued kernels, a host that
waits for its next batch costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from stepscope.analysis.diagnosis_text import cpu_text
from stepscope.jobfolder import JsonObject
from stepscope.rules._cpu_facts import (
    RankFacts,
    min_steps,
    node_cores,
    rank_facts,
    sample_median,
    skip_steps,
)
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._params import Param, min_cost_s
from stepscope.rules._saving import autogroup_of, bounded, idle_core_bound
from stepscope.rules._train_frame import rows_with_waited, train_frame, typical_rows
from stepscope.rules._types import Finding
from stepscope.rules._windows import share_finding

READ = ("rank", "node", "step", "start", "end", "duration", "data_wait")  # copied: no more


@dataclass(frozen=True)
class Priced:
    """A rank's data wait (its cost), what more workers would save, and why less."""

    cost: float
    saving: float
    why: str | None = None
    off_cpu: float = 0.0  # of the wait, at least off the CPU (unknown: 0)

    def text(self) -> str:
        """For the finding's fix: the saving, when the idle cores bound it."""
        if not self.why or f"{self.saving:.1f}" == f"{self.cost:.1f}":
            return ""
        return f", which would save at most {self.saving:.1f} s of it"


class DataLoaderWorkers(NodeRule):
    name = "DataLoaderWorkers"
    reads_train_frame = True
    description = (
        "Training steps wait for data while the DataLoader has no workers, or while its "
        "workers are each busy near a whole core."
    )
    recommendation = (
        "With num_workers=0, set DataLoader(num_workers=N) (N up to the idle cores; for a "
        "wait off the CPU, slow storage, enough to overlap it: the finding says how many); "
        "with saturated workers, add workers while cores are idle, else make the transforms "
        "cheaper (decode once, pre-process offline, vectorise, smaller images)."
    )
    params = (
        Param("threshold", 20, "share of typical step time in data_wait that fires the rule, %"),
        Param("worker_cpu_threshold", 50, "median CPU per worker that makes it saturated, %"),
        min_steps(),
        skip_steps(5),
        min_cost_s(),
    )

    def check(self, data: RuleInput) -> Part:
        facts = rank_facts(data.events)
        known = {r: f for r, f in facts.items() if f.workers is not None}
        if not known:
            return Part(na_reason="no dataloader event: the DataLoader's settings are unknown")
        frame = train_frame(data)  # shared with the other step rules: never changed
        ranks, waits = frame["rank"], frame["data_wait"]
        known_waits = ranks.isin(list(known)) & waits.notna()  # unknown: not 0
        typical = typical_rows(frame, self.p_int("skip_steps"), known_waits)
        if len(typical) < self.p_int("min_steps"):
            return Part(na_reason=f"fewer than {self.p_int('min_steps')} training steps to judge")
        workers = sum(f.workers or 0 for f in known.values())  # every rank's, on this node
        findings, worst = [], Priced(-1.0, 0.0)
        of_rank = ranks.to_numpy()[typical]
        for rank in sorted(int(r) for r in np.unique(of_rank)):
            # One rank's steps at a time, only the columns read; on a GPU, with what the
            # device waited for
            mine = typical if len(known) == 1 else typical[of_rank == rank]
            rows = rows_with_waited(frame, mine, READ, "data_wait")
            priced = self._priced(data, rows, known[rank])
            finding = self._judge(data, rank, rows, known[rank], workers, priced)
            if finding is not None:
                findings.append(finding)
                worst = max(worst, priced, key=lambda p: p.cost)
        if not findings:
            return Part([], 0, len(typical))
        details: JsonObject = {"saving_bound": worst.why} if worst.why else {}
        cost, saving = worst.cost, worst.saving
        return Part(findings, len(findings), len(typical), details, cost_seconds=cost,
                    saving_seconds=saving)  # fmt: skip

    @staticmethod
    def _priced(data: RuleInput, rows: pd.DataFrame, facts: RankFacts) -> Priced:
        """The rank's wait and what more workers can save of it: the idle cores' bound."""
        wait = float(rows["data_wait"].sum())
        span = float(rows["start"].min()), float(rows["end"].max())
        cores = node_cores(data, {int(rows["rank"].iloc[0]): facts})
        times = float(rows["duration"].sum()), wait
        grouped = autogroup_of(data)
        bound = idle_core_bound(data.system, span, times, cores, facts.affinity, grouped)
        return Priced(wait, *bounded(wait, bound), off_cpu=bound.off_cpu if bound else 0.0)

    def _judge(
        self,
        data: RuleInput,
        rank: int,
        rows: pd.DataFrame,
        facts: RankFacts,
        workers: int,
        priced: Priced,
    ) -> Finding | None:
        total = float(rows["duration"].sum())
        share = float(rows["data_wait"].sum()) / total * 100.0 if total > 0 else 0.0
        threshold = float(self.p_float("threshold"))
        if share <= threshold:
            return None
        start, end = float(rows["start"].min()), float(rows["end"].max())
        if not facts.workers:
            what = "with num_workers=0: every batch is made on the training thread"
            fix = first_workers(rows, priced)
            return self._finding(rows, rank, share, what, fix + priced.text())
        busy = sample_median(data.system, "proc_cpu", start, end)
        main = sample_median(data.system, "proc_cpu_main", start, end)
        if busy is None:  # no process CPU at all (an imported job): judge against the cores
            return self._few_workers(data, rank, rows, facts, share, (start, end), priced)
        if main is None:
            return None  # the workers' CPU is unknown: DataLoading reports the wait
        # A worker waiting for a core is as busy as one running: starved by other
        # processes, it uses less than the threshold and still feeds the loop too slowly.
        queued = sample_median(data.system, "proc_pool_run_wait", start, end) or 0.0
        used = max(busy - main, 0.0) / workers
        if used + queued / workers < float(self.p_float("worker_cpu_threshold")):
            return None
        cores = node_cores(data, {rank: facts})
        what = f"while its {facts.workers} worker(s) each used a median {_cpu(used, cores)}"
        if queued / workers >= 1.0:
            what += f" and waited {_cpu(queued / workers, cores)} for a core"
        fix = self._more_workers(data, (start, end), cores, priced)
        return self._finding(rows, rank, share, what + " (saturated)", fix + priced.text())

    def _more_workers(
        self, data: RuleInput, span: tuple[float, float], cores: int | None, priced: Priced
    ) -> str:
        """Where more workers help: idle cores, or a fair share of busy ones that saves
        at least ``min_cost_s``; else cheaper transforms."""
        cpu = sample_median(data.system, "cpu", *span)
        idle = cores * (1.0 - cpu / 100.0) if cores and cpu is not None else None
        if idle is not None and idle >= 1.0:
            return f"add workers: about {idle:.1f} core(s) idle"
        if priced.saving >= max(float(self.p_float("min_cost_s")), 1e-9):
            return "add workers: no core is idle, but they would take a fair share of the busy ones"
        return "make the transforms cheaper: no core is idle"

    def _few_workers(
        self,
        data: RuleInput,
        rank: int,
        rows: pd.DataFrame,
        facts: RankFacts,
        share: float,
        span: tuple[float, float],
        priced: Priced,
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
        fix = "add workers, up to the idle cores" + priced.text()
        return self._finding(rows, rank, share, what, fix)

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


def _cpu(per_core: float, cores: int | None) -> str:
    """CPU as % of one core summed, shown as % of the node with the cores."""
    return cpu_text(per_core / cores, cores, 0) if cores else f"{per_core / 100:.2f} core"


MOST_WORKERS = 16  # more than this many sleeping workers is a storage problem to name


def first_workers(rows: pd.DataFrame, priced: Priced) -> str:
    """How many workers a loop without any needs. A loader that computes: up to the idle
    cores. One whose wait is mostly off the CPU (slow storage, a sleep): enough to
    fetch a batch in the time the steps' own work takes (its ``wait / (steps - wait)``,
    totals: throughput, not a typical step), cores or not."""
    if priced.off_cpu < 0.5 * priced.cost:
        return "set DataLoader(num_workers=N), N up to the idle cores"
    wait, total = float(rows["data_wait"].sum()), float(rows["duration"].sum())
    n = min(int(np.ceil(wait / (total - wait))), MOST_WORKERS) if total > wait else MOST_WORKERS
    return (
        f"set DataLoader(num_workers={max(n, 1)}): the wait is mostly off the CPU (slow "
        f"storage, a sleep), which workers overlap without cores; {max(n, 1)} fetch a batch "
        "in the time a step's own work takes"
    )
