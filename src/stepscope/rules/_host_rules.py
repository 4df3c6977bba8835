"""Rules on the host the job shares: HostContention and MemoryPressure (CPU-only jobs too).

Both judge the optional pressure columns of ``system/<node>/`` (``cpu_steal``,
``run_queue``, ``swap_*``; absent in older jobs: NotApplicable) window by window,
and say how the job's step time varies with the problem (``_host_base``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from stepscope.analysis.diagnosis_text import cpu_text
from stepscope.analysis.downsample import FloatArray
from stepscope.analysis.host import others_cpu, run_wait_in
from stepscope.jobfolder import JsonObject
from stepscope.rules._host_base import HostRule, StepEffect, medians_in
from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param, patience, window
from stepscope.rules._reduce import Windows
from stepscope.rules._system_base import lasted, pct
from stepscope.rules._types import Finding
from stepscope.rules._windows import Hit, run_finding, worst_of

TOP = 3  # other processes named in a finding
SCAN_SLACK_S = 5.0  # an others/ row covers the few seconds before its time


def top_others(others: pd.DataFrame, start: float, end: float) -> list[dict[str, object]]:
    """The busiest other processes between ``start`` and ``end`` (all the node's rows if
    none then), by CPU summed over their rows: pid, name, command, median CPU."""
    if not len(others):
        return []
    t = others["time"].to_numpy()
    inside = (t >= start) & (t <= end + SCAN_SLACK_S)
    rows = others[inside] if inside.any() else others
    # The totals of all, then the median and command of the top few only: one grouped
    # aggregation of three columns cost 10x more, at every live scan (issue 32).
    totals = rows.groupby(["pid", "name"], sort=False)["cpu"].sum()
    top = totals.sort_values(ascending=False).head(TOP).index
    pids, names = rows["pid"].to_numpy(), rows["name"].to_numpy()
    cpu, commands = rows["cpu"].to_numpy(np.float64), rows["command"].to_numpy()
    out: list[dict[str, object]] = []
    for pid, name in top:
        mine = (pids == pid) & (names == name)
        known = [c for c in commands[mine] if isinstance(c, str)]  # as pandas' "first"
        out.append({"pid": _plain(pid), "name": _plain(name), "command": next(iter(known), None),
                    "cpu": float(np.median(cpu[mine]))})  # fmt: skip
    return out


def _plain(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if item is not None else value


def _named(top: list[dict[str, object]], cores: float) -> str:
    """The busiest others, their CPU (``others/``: % of one core) as % of the node."""
    if not top:
        return "no other process was recorded above 0.05 core"
    return "top: " + ", ".join(
        f"{p['name']} (pid {p['pid']}, {cpu_text(float(str(p['cpu'])) / cores, cores, 0)})"
        for p in top
    )


class HostContention(HostRule):
    name = "HostContention"
    description = "Other processes (or other virtual machines) take CPU the job needs."
    recommendation = (
        "Stop or move the other processes named in the finding, or lower their priority "
        "(renice +19 -p PID); run the job on a node of its own or on cores the others do "
        "not use (taskset); with steal time, choose a dedicated instance."
    )
    params = (
        pct(
            "others_threshold",
            25,
            "CPU of other processes (node CPU minus the job's), "
            "of all cores, from which a sample can be contended",
        ),
        pct("cpu_threshold", 90, "node CPU from which the node is saturated"),
        Param("run_queue_ratio", 1.0, "runnable tasks per core above which tasks wait", float),
        pct("steal_threshold", 10, "steal time that alone makes a sample contended"),
        pct("threshold", 50, "share of contended samples in a window that fires the rule"),
        patience(10),
        window(20),
    )
    required = ("cpu", "proc_cpu", "run_queue")

    def columns(self, gpus: list[int]) -> list[str]:
        return ["time", "node", "cpu", "proc_cpu", "run_queue", "cpu_steal", "own_cpu"]

    def measured(
        self, data: RuleInput, hit: pd.DataFrame, quiet: pd.DataFrame
    ) -> StepEffect | None:
        """The job's threads' run-queue wait inside the contended steps (each step's at
        most its duration; over the node's ranks), the slowest rank's; the cost is
        that wait beyond the rank's usual one: its quiet steps' median share of a step
        spent waiting (0 without quiet steps: alone, a loop hardly waits), at most
        their excess over the quiet steps' median duration. None
        without a wait column (older jobs, no schedstat) or a step it tells of."""
        shared = max(1, int(data.steps["rank"].nunique()))  # the node's ranks share the sum
        waits, d = self._waits(data, hit, shared), hit["duration"].to_numpy(np.float64)
        known = np.isfinite(waits)
        if not known.any():
            return None
        usual_waits = self._waits(data, quiet, shared)
        usual_d = quiet["duration"].to_numpy(np.float64)
        ranks, usual_ranks = hit["rank"].to_numpy(), quiet["rank"].to_numpy()
        measured, cost = 0.0, 0.0
        for rank in np.unique(ranks[known]):
            mine = known & (ranks == rank)
            usual = np.isfinite(usual_waits) & (usual_ranks == rank) & (usual_d > 0)
            share = float(np.median(usual_waits[usual] / usual_d[usual])) if usual.any() else 0.0
            waited = float(waits[mine].sum())
            measured = max(measured, waited)
            mine_cost = float(np.clip(waits[mine] - share * d[mine], 0.0, None).sum())
            if usual.any():  # never more than the steps' excess over the quiet ones: the
                # threads' waits are summed, and their waits may overlap
                excess = np.clip(d[mine] - float(np.median(usual_d[usual])), 0.0, None)
                mine_cost = min(mine_cost, float(excess.sum()))
            cost = max(cost, mine_cost)
        as_text = "its threads waited {} for a core during them"
        return StepEffect(cost=cost, measured=measured, measured_as=as_text)

    @staticmethod
    def _waits(data: RuleInput, steps: pd.DataFrame, shared: int) -> FloatArray:
        """Seconds each step's rank waited for a core inside it (at most the step)."""
        start, end = steps["start"].to_numpy(np.float64), steps["end"].to_numpy(np.float64)
        waits = run_wait_in(data.system, start, end) / shared
        return np.asarray(np.minimum(waits, steps["duration"].to_numpy(np.float64)), np.float64)

    def unjudged(self, data: RuleInput) -> str | None:
        if data.cores() is None:
            return "no core count (nodes/<node>.json) to share the node's CPU by"
        return None

    def more_details(self, data: RuleInput) -> JsonObject:
        return {"top": top_others(data.others, -np.inf, np.inf)}

    def _series(self, framed: pd.DataFrame, data: RuleInput) -> dict[str, pd.Series]:
        cores = data.cores() or 1.0
        job = framed["proc_cpu"].astype(np.float64) / cores
        steal = framed["cpu_steal"] if "cpu_steal" in framed else pd.Series(np.nan, framed.index)
        others = others_cpu(framed, cores)
        if others is None:  # no proc_cpu at all: nothing of the job's to take away
            others = pd.Series(np.nan, framed.index)
        return {"others": others, "job": job, "run_queue": framed["run_queue"], "steal": steal,
                "cores": pd.Series(cores, framed.index)}  # fmt: skip

    def _ordered(self, s: pd.Series, w: Windows) -> npt.NDArray[np.float64]:
        """``s`` (aligned with ``framed``) in the windows' order."""
        x: npt.NDArray[np.float64] = s.to_numpy(np.float64)
        return x if w.order is None else x[w.order]

    def flags(self, framed: pd.DataFrame, w: Windows, data: RuleInput) -> npt.NDArray[np.bool_]:
        s = {k: self._ordered(v, w) for k, v in self._series(framed, data).items()}
        cpu = self._ordered(framed["cpu"], w)
        busy = (s["others"] >= self.p_float("others_threshold")) & (
            cpu >= self.p_float("cpu_threshold")
        )
        waiting = s["run_queue"] > self.p_float("run_queue_ratio") * s["cores"]
        return np.asarray((busy & waiting) | (s["steal"] >= self.p_float("steal_threshold")))

    def level(self, framed: pd.DataFrame, w: Windows, data: RuleInput) -> npt.NDArray[np.float64]:
        return self._ordered(self._series(framed, data)["others"], w)

    def describe(
        self, node: str, run: list[Hit], framed: pd.DataFrame, data: RuleInput, effect: StepEffect
    ) -> Finding:
        m = medians_in(framed, run, self._series(framed, data))
        steal = f", steal {m['steal']:.0f}%" if m["steal"] >= 1 else ""
        cores = float(m["cores"])
        top = _named(top_others(data.others, run[0].start, run[-1].end), cores)
        value, threshold = worst_of(run), self.p_float("others_threshold")
        others, job = cpu_text(m["others"], cores, 0), cpu_text(m["job"], cores, 0)
        text = (
            f"other processes used {others} of {node}'s CPU (median; the job "
            f"{job}, run queue {m['run_queue']:.0f} on {m['cores']:.0f} cores{steal}) "
            f"for {lasted(run)}; {top}; {effect.text()}"
        )
        return run_finding(text, self.recommendation, run, value, threshold, 100.0, node=node)


class MemoryPressure(HostRule):
    name = "MemoryPressure"
    description = "The node swaps, or its memory is nearly full."
    recommendation = (
        "Use less memory: fewer or lighter DataLoader workers (each may hold a copy of the "
        "dataset), a smaller batch or prefetch_factor, data loaded lazily or memory-mapped; "
        "stop other processes that hold memory; or use a node with more RAM."
    )
    params = (
        Param("swap_threshold", 1.0, "swap traffic (in + out) from which a sample swaps, MB/s"),
        pct("mem_threshold", 95, "memory used from which memory is nearly full"),
        pct("threshold", 50, "share of flagged samples in a window that fires the rule"),
        patience(10),
        window(20),
    )
    required = ("mem_percent",)

    def columns(self, gpus: list[int]) -> list[str]:
        return ["time", "node", "mem_percent", "proc_rss", "swap_in_bps", "swap_out_bps"]

    def _swap(self, framed: pd.DataFrame) -> pd.Series:
        """Swap traffic, bytes/s (NaN where not recorded: an older job judges memory only)."""
        if "swap_in_bps" not in framed or "swap_out_bps" not in framed:
            return pd.Series(np.nan, framed.index)
        return framed["swap_in_bps"].astype(np.float64) + framed["swap_out_bps"]

    def flags(self, framed: pd.DataFrame, w: Windows, data: RuleInput) -> npt.NDArray[np.bool_]:
        swap = w.columns(framed.assign(swap=self._swap(framed)), ["swap", "mem_percent"])
        swapping = swap[:, 0] >= self.p_float("swap_threshold") * 1e6
        return np.asarray(swapping | (swap[:, 1] >= self.p_float("mem_threshold")))

    def level(self, framed: pd.DataFrame, w: Windows, data: RuleInput) -> npt.NDArray[np.float64]:
        return w.columns(framed, ["mem_percent"])[:, 0]

    def describe(
        self, node: str, run: list[Hit], framed: pd.DataFrame, data: RuleInput, effect: StepEffect
    ) -> Finding:
        nothing = pd.Series(np.nan, framed.index)
        series = {"mem": framed["mem_percent"], "swap": self._swap(framed)}
        series["rss"] = framed.get("proc_rss", nothing)
        m = medians_in(framed, run, series)
        swap_mb, swap_threshold = m["swap"] / 1e6, self.p_float("swap_threshold")
        swap = "swap not recorded" if np.isnan(swap_mb) else f"swapping {swap_mb:.3g} MB/s"
        rss = "" if np.isnan(m["rss"]) else f"; the job holds {m['rss'] / 1e9:.3g} GB"
        # In the units of what fired: swap traffic if the node swapped, else memory used.
        swapped = bool(swap_mb >= swap_threshold)
        value = swap_mb if swapped else m["mem"]
        threshold = swap_threshold if swapped else self.p_float("mem_threshold")
        worst = 10 * swap_threshold if swapped else 100.0
        text = (
            f"{node}: memory {m['mem']:.0f}% used, {swap} (medians{rss}) for {lasted(run)}; "
            f"{effect.text()}"
        )
        return run_finding(text, self.recommendation, run, value, threshold, worst, node=node)
