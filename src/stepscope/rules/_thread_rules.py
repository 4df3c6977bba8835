"""CPUBoundThreads: torch's thread count does not fit the cores the job may use.

From the agent's ``threads`` and ``dataloader`` events and the node's samples, per
node, over the typical training steps (stalls left out):

* **oversubscribed**: the demand, the ranks' intra-op threads plus the cores their
  data-loader workers use (``proc_cpu - proc_cpu_main``, median), exceeds
  ``max_ratio`` times the usable cores (the ranks' CPU affinity): threads take turns
  on the cores, and torch's spinning threads lose the time they wait;
* **underused**: the main processes use their threads fully (median CPU at least
  ``busy_threshold`` % of the threads), at least ``min_idle_cores`` cores are idle
  (node CPU, median, stepscope's own ``own_cpu`` counted as idle; a core is idle at
  ``busy_threshold`` % of it, as a thread is busy), and the threads plus the workers
  leave such cores unused. Without the tolerance one busy thread on 2 cores never
  fired: the sampler and the OS keep the other core's idle just under 1.

Both only when the steps are mostly compute (median share of forward, backward and
optimizer at least ``compute_share``): otherwise the threads are not what a step
waits for. On a GPU the device computes: a step's host compute counts only up to
the device idle within the step (``rules._device``), the host compute the device
waited for; a GPU-bound job is not "mostly compute" on its CPU threads. No cost
is estimated: how a step scales with threads is not measured.
"""

from __future__ import annotations

import pandas as pd

from stepscope.jobfolder import JsonObject
from stepscope.rules._cpu_facts import (
    COMPUTE,
    RankFacts,
    median_share,
    min_steps,
    node_cores,
    rank_facts,
    sample_median,
    skip_steps,
    train_steps,
)
from stepscope.rules._device import device_steps
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._params import Param
from stepscope.rules._train_frame import train_frame
from stepscope.rules._types import Finding
from stepscope.rules._windows import severity


class CPUBoundThreads(NodeRule):
    name = "CPUBoundThreads"
    reads_train_frame = True
    description = (
        "Compute-bound training whose torch threads (plus data-loader workers) exceed the "
        "usable cores, or keep to fewer threads than the cores left idle."
    )
    recommendation = (
        "Match threads to cores: torch.set_num_threads(N) (or OMP_NUM_THREADS=N) with N the "
        "usable cores minus the cores the DataLoader workers use, divided by the ranks of the "
        "node; check os.sched_getaffinity(0) (taskset, container CPU limits)."
    )
    params = (
        Param("max_ratio", 1.25, "demand (threads + workers' cores) over usable cores that fires"),
        Param("busy_threshold", 90, "main processes' CPU, % of their threads, that is CPU-bound"),
        Param("min_idle_cores", 1, "idle cores (median) that make more threads worth having"),
        Param("compute_share", 50, "median share of step time in forward+backward+optimizer, %"),
        min_steps(),
        skip_steps(5),
    )

    def check(self, data: RuleInput) -> Part:
        facts = {r: f for r, f in rank_facts(data.events).items() if f.threads}
        if not facts:
            return Part(na_reason="no threads event: torch's thread count is unknown")
        frame = train_frame(data)  # shared with the other step rules: never changed
        steps = train_steps(frame, self.p_int("skip_steps"), then=frame["rank"].isin(list(facts)))
        if len(steps) < self.p_int("min_steps"):
            return Part(na_reason=f"fewer than {self.p_int('min_steps')} training steps to judge")
        compute = median_share(steps, COMPUTE)
        if compute < float(self.p_float("compute_share")):
            details: JsonObject = {"compute_share": compute}
            if device_steps(steps):  # the share is of host compute the device waited for
                details["device_steps"] = device_steps(steps)
            return Part([], 0, len(steps), details=details)
        finding = self._judge(data, steps, facts)
        return Part([finding] if finding else [], int(finding is not None), len(steps))

    def _judge(
        self, data: RuleInput, steps: pd.DataFrame, facts: dict[int, RankFacts]
    ) -> Finding | None:
        start, end = float(steps["start"].min()), float(steps["end"].max())
        cores = node_cores(data, facts)
        usable = min((f.affinity for f in facts.values() if f.affinity), default=cores)
        if not usable:
            return None
        threads = sum(f.threads or 0 for f in facts.values())
        workers = sum(f.workers or 0 for f in facts.values())
        total = sample_median(data.system, "proc_cpu", start, end)
        main = sample_median(data.system, "proc_cpu_main", start, end)
        if main is None and not workers:
            main = total  # no workers: the job's processes are the main ones
        known = total is not None and main is not None
        worker_cores = max((total or 0.0) - (main or 0.0), 0.0) / 100.0 if known else 0.0
        demand = threads + worker_cores
        what = f"{threads} torch thread(s)" + (
            f" + {worker_cores:.1f} core(s) of {workers} worker(s)" if workers else ""
        )
        ratio = float(self.p_float("max_ratio"))
        if demand > ratio * usable:
            return self._finding(
                steps, f"oversubscribed: {what} on {usable} usable core(s)", demand, ratio * usable
            )
        idle = self._idle(data, cores, start, end)
        busy = float(self.p_float("busy_threshold")) / 100.0
        spare = min(usable - demand, idle) if idle is not None else 0.0
        # A core counts as idle at busy_threshold of it, as a thread counts as busy: the
        # OS and other light processes take a little of every core.
        if (
            main is None
            or main < busy * threads * 100.0
            or spare < busy * self.p_float("min_idle_cores")
        ):
            return None
        return self._finding(
            steps,
            f"CPU-bound at {what} (main processes at {main:.0f}% CPU) while about "
            f"{spare:.1f} of {usable} usable core(s) stay idle",
            demand,
            demand + spare,
        )

    @staticmethod
    def _idle(data: RuleInput, cores: int | None, start: float, end: float) -> float | None:
        """Idle cores (median), stepscope's own CPU (``own_cpu``: the sampler, the live
        rule runner) counted as idle: the measurement is not the node's work."""
        cpu = sample_median(data.system, "cpu", start, end)
        if not cores or cpu is None:
            return None
        own = sample_median(data.system, "own_cpu", start, end) or 0.0
        return min(cores * (1.0 - cpu / 100.0) + own / 100.0, float(cores))

    def _finding(self, steps: pd.DataFrame, what: str, value: float, limit: float) -> Finding:
        first, last = int(steps["step"].min()), int(steps["step"].max())
        over = value > limit
        return Finding(
            f"{steps['node'].iloc[0]}: {what}, in steps {first}-{last}",
            self.recommendation,
            severity(value, limit, 2 * limit) if over else severity(value, limit, 0.0),
            node=str(steps["node"].iloc[0]),
            start=float(steps["start"].min()),
            end=float(steps["end"].max()),
            steps=(first, last),
            value=value,
            threshold=limit,
        )
