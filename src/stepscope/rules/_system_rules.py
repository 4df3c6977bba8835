"""Rules on system samples: BatchSize, CPUBottleneck, IOBottleneck, LowGPUUtilization.

Each judges one node at a time, window by aligned window (see ``_windows``),
after the ``patience`` samples at the start of the job.
"""

from __future__ import annotations

import pandas as pd

from ._base import NodeRule, Part
from ._input import RuleInput
from ._params import Param, patience, window
from ._types import Finding
from ._windows import (
    Hit,
    after_patience,
    gpu_indices,
    hits_from,
    no_gpu_reason,
    patience_reason,
    runs,
    severity,
    window_spans,
    with_windows,
    worst_of,
)


def pct(name: str, default: float, doc: str) -> Param:
    return Param(name, default, f"{doc}, %", float)


def lasted(run: list[Hit]) -> str:
    seconds = run[-1].end - run[0].start
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


class SystemRule(NodeRule):
    """A node rule over the node's samples after patience, in windows."""

    needs_gpu = True

    def check(self, data: RuleInput) -> Part:
        gpus = gpu_indices(data.system)
        if self.needs_gpu and not gpus:
            return Part(na_reason=no_gpu_reason(data))
        # Only the columns the rule reads: a day of a node's samples is ~100 wide columns.
        wanted = [c for c in self.columns(gpus) if c in data.system]
        judged = after_patience(data, data.system[wanted], self.p("patience"))
        if not len(judged):
            return Part(na_reason=patience_reason(self.p("patience"), len(data.system)))
        framed = with_windows(data, judged, self.p("window"))
        node = str(judged["node"].iloc[0])
        found = runs(self.hits(framed, gpus))
        findings = [self.finding(node, run) for run in found]
        return Part(findings, sum(len(r) for r in found), len(judged))

    def columns(self, gpus: list[int]) -> list[str]:
        """The system columns the rule reads."""
        per_gpu = ("util", "mem_util", "mem_used", "mem_total")
        return [
            "time",
            "node",
            "cpu",
            "cpu_iowait",
            *(f"gpu{g}_{m}" for g in gpus for m in per_gpu),
        ]

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        raise NotImplementedError

    def finding(self, node: str, run: list[Hit]) -> Finding:
        raise NotImplementedError


class _ShareRule(SystemRule):
    """Fires where the share of bottlenecked samples in a window exceeds ``threshold``."""

    what = ""

    def bottlenecked(self, framed: pd.DataFrame, gpu_mean: pd.Series) -> pd.Series:
        raise NotImplementedError

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        gpu_mean = framed[[f"gpu{g}_util" for g in gpus]].mean(axis=1)
        share = self.bottlenecked(framed, gpu_mean).groupby(framed["win"]).mean() * 100.0
        table = pd.DataFrame({"value": share})
        return hits_from(
            table, window_spans(framed), "", lambda r: r["value"] > self.p("threshold")
        )

    def finding(self, node: str, run: list[Hit]) -> Finding:
        value = worst_of(run)
        return Finding(
            f"{self.what} on {node}: {value:.0f}% of samples bottlenecked "
            f"(> {self.p('threshold'):g}%) for {lasted(run)}",
            self.recommendation,
            severity(value, self.p("threshold"), 100.0),
            node=node,
            start=run[0].start,
            end=run[-1].end,
            value=value,
            threshold=self.p("threshold"),
        )


class CPUBottleneck(_ShareRule):
    name = "CPUBottleneck"
    description = "GPUs wait while the CPU is saturated (a CPU bottleneck)."
    recommendation = (
        "Move preprocessing off the training loop: more DataLoader workers, lighter "
        "transforms, or pre-processed data; or choose an instance with more CPU cores."
    )
    params = (
        pct("threshold", 50, "share of bottlenecked samples in a window that fires the rule"),
        pct("gpu_threshold", 10, "mean GPU utilization below which the GPUs are idle"),
        pct("cpu_threshold", 90, "CPU utilization above which the CPU is saturated"),
        patience(100),
        window(500),
    )
    what = "CPU bottleneck"

    def bottlenecked(self, framed: pd.DataFrame, gpu_mean: pd.Series) -> pd.Series:
        cpu = framed["cpu"] > self.p("cpu_threshold")
        return cpu & (gpu_mean < self.p("gpu_threshold"))


class IOBottleneck(_ShareRule):
    name = "IOBottleneck"
    description = "GPUs wait while the CPU waits for I/O (an I/O bottleneck)."
    recommendation = (
        "Read data faster: local or faster storage, larger sequential files (shards, "
        "WebDataset, TFRecord), caching, or more DataLoader workers to overlap the reads."
    )
    params = (
        pct("threshold", 50, "share of bottlenecked samples in a window that fires the rule"),
        pct("gpu_threshold", 70, "mean GPU utilization below which the GPUs are underused"),
        pct("io_threshold", 50, "CPU I/O wait above which I/O is the bottleneck"),
        patience(1000),
        window(500),
    )
    what = "I/O bottleneck"

    def bottlenecked(self, framed: pd.DataFrame, gpu_mean: pd.Series) -> pd.Series:
        io = framed["cpu_iowait"] > self.p("io_threshold")
        return io & (gpu_mean < self.p("gpu_threshold"))


class BatchSize(SystemRule):
    name = "BatchSize"
    description = "CPU, GPU and GPU memory all lightly used: the batch may be too small."
    recommendation = (
        "Increase the batch size (scale the learning rate with it) or run on a smaller, "
        "cheaper instance; watch for a data-loading bottleneck as the batch grows."
    )
    params = (
        pct("cpu_threshold_p95", 70, "95th percentile of CPU utilization below which it is low"),
        pct("gpu_threshold_p95", 70, "95th percentile of GPU utilization below which it is low"),
        pct("gpu_memory_threshold_p95", 70, "95th percentile of GPU memory below which it is low"),
        patience(100),
        window(500),
    )

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        by_win = framed.groupby("win")
        cpu = by_win["cpu"].quantile(0.95)
        spans, hits = window_spans(framed), []
        for g in gpus:
            q = by_win[[f"gpu{g}_util", f"gpu{g}_mem_util"]].quantile(0.95)
            table = pd.DataFrame({"value": q.iloc[:, 0], "mem": q.iloc[:, 1], "cpu": cpu})
            hits += hits_from(table, spans, f"gpu{g}", self._low)
        return hits

    def _low(self, table: pd.DataFrame) -> pd.Series:
        return (
            (table["cpu"] < self.p("cpu_threshold_p95"))
            & (table["value"] < self.p("gpu_threshold_p95"))
            & (table["mem"] < self.p("gpu_memory_threshold_p95"))
        )

    def finding(self, node: str, run: list[Hit]) -> Finding:
        value, threshold = worst_of(run, higher_is_worse=False), self.p("gpu_threshold_p95")
        return Finding(
            f"{run[0].key} on {node}: p95 GPU utilization {value:.0f}% with CPU and GPU memory "
            f"also below their p95 thresholds, for {lasted(run)}",
            self.recommendation,
            severity(value, threshold, 0.0),
            node=node,
            device=run[0].key,
            start=run[0].start,
            end=run[-1].end,
            value=value,
            threshold=threshold,
        )


class LowGPUUtilization(SystemRule):
    name = "LowGPUUtilization"
    description = "A GPU is underused (low 95th percentile) or fluctuates (low 5th percentile)."
    recommendation = (
        "Find what the GPU waits for (data loading, CPU work, synchronization: see the "
        "other rules); for underuse, increase the batch size or use fewer or smaller GPUs."
    )
    params = (
        pct("threshold_p95", 70, "95th percentile of GPU utilization below which it is underused"),
        pct("threshold_p5", 10, "5th percentile of GPU utilization below which it fluctuates"),
        patience(1000),
        window(500),
    )

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        by_win, spans, hits = framed.groupby("win"), window_spans(framed), []
        for g in gpus:
            q = by_win[f"gpu{g}_util"].quantile([0.05, 0.95]).unstack()
            low = pd.DataFrame({"value": q[0.95]})
            hits += hits_from(low, spans, f"gpu{g}:low", lambda r: r["value"] < self._p95)
            swing = pd.DataFrame({"value": q[0.05].where(q[0.95] >= self._p95)})
            hits += hits_from(swing, spans, f"gpu{g}:fluctuating", lambda r: r["value"] < self._p5)
        return hits

    @property
    def _p95(self) -> float:
        return float(self.p("threshold_p95"))

    @property
    def _p5(self) -> float:
        return float(self.p("threshold_p5"))

    def finding(self, node: str, run: list[Hit]) -> Finding:
        device, kind = run[0].key.split(":")
        value = worst_of(run, higher_is_worse=False)
        low = kind == "low"
        threshold = self._p95 if low else self._p5
        what = "underused: p95 utilization" if low else "fluctuates: p5 utilization"
        return Finding(
            f"{device} on {node} {what} {value:.0f}% (< {threshold:g}%) for {lasted(run)}",
            self.recommendation,
            severity(value, threshold, 0.0),
            node=node,
            device=device,
            start=run[0].start,
            end=run[-1].end,
            value=value,
            threshold=threshold,
        )
