"""Rules on system samples: BatchSize, CPUBottleneck, IOBottleneck, LowGPUUtilization.

Each judges one node at a time, window by aligned window (see ``_windows``),
after the ``patience`` samples at the start of the job; their base,
:class:`SystemRule`, is in ``_system_base``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from stepscope.analysis.downsample import FloatArray
from stepscope.analysis.host import others_cpu
from stepscope.rules._device import with_loop_gpus
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import Part
from stepscope.rules._params import patience, window
from stepscope.rules._reduce import Windows
from stepscope.rules._system_base import SystemRule, lasted, pct
from stepscope.rules._text import versus
from stepscope.rules._types import Finding
from stepscope.rules._windows import Hit, node_gpus, run_finding, worst_of


class _ShareRule(SystemRule):
    """Fires where the share of bottlenecked samples in a window exceeds ``threshold``."""

    what = ""

    def bottlenecked(self, host: FloatArray, gpu_mean: FloatArray) -> npt.NDArray[np.bool_]:
        """Per sample: bottlenecked, from the host column (``cpu``, ``cpu_iowait``)."""
        raise NotImplementedError

    host_column = "cpu"

    def needs(self, gpus: list[int]) -> list[tuple[str, ...]]:
        return [(self.host_column,)]

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        w = self.windows_of(framed)
        util = w.columns(framed, [f"gpu{g}_util" for g in gpus])
        n = (~np.isnan(util)).sum(axis=1)
        total = np.nansum(util, axis=1)
        gpu_mean = np.divide(total, n, out=np.full_like(total, np.nan), where=n > 0)
        share = w.share(self.bottlenecked(self.host(framed, w), gpu_mean))
        return w.hits("", share, share > self.p_float("threshold"))

    def host(self, framed: pd.DataFrame, w: Windows) -> FloatArray:
        """Per sample, in window order: the host value :meth:`bottlenecked` judges."""
        return w.columns(framed, [self.host_column])[:, 0]

    def finding(self, node: str, run: list[Hit]) -> Finding:
        value, threshold = worst_of(run), self.p_float("threshold")
        text = (
            f"{self.what} on {node}: {versus(value, threshold, '%')} of "
            f"samples bottlenecked for {lasted(run)}"
        )
        return run_finding(text, self.recommendation, run, value, threshold, 100.0, node=node)


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

    def bottlenecked(self, host: FloatArray, gpu_mean: FloatArray) -> npt.NDArray[np.bool_]:
        return (host > self.p_float("cpu_threshold")) & (gpu_mean < self.p_float("gpu_threshold"))


class IOBottleneck(_ShareRule):
    """I/O wait is the job's where the sampler recorded it (``proc_io_wait``: the share
    of its active threads in disk sleep), the node's CPU I/O wait elsewhere (older
    jobs): on a shared node other processes' work turns the node's I/O wait (idle
    time) into busy time, and their I/O is not the job's."""

    name = "IOBottleneck"
    description = "GPUs wait while the job waits for storage (an I/O bottleneck)."
    recommendation = (
        "Read data faster: local or faster storage, larger sequential files (shards, "
        "WebDataset, TFRecord), caching, or more DataLoader workers to overlap the reads."
    )
    params = (
        pct("threshold", 50, "share of bottlenecked samples in a window that fires the rule"),
        pct("gpu_threshold", 70, "mean GPU utilization below which the GPUs are underused"),
        pct("io_threshold", 50, "the job's I/O wait above which I/O is the bottleneck"),
        patience(1000),
        window(500),
    )
    what = "I/O bottleneck"
    host_column = "cpu_iowait"

    def columns(self, gpus: list[int]) -> list[str]:
        return [*super().columns(gpus), "proc_io_wait"]

    def needs(self, gpus: list[int]) -> list[tuple[str, ...]]:
        return [("proc_io_wait", "cpu_iowait")]

    def host(self, framed: pd.DataFrame, w: Windows) -> FloatArray:
        node = super().host(framed, w)
        if "proc_io_wait" not in framed:
            return node
        job = w.columns(framed, ["proc_io_wait"])[:, 0]
        return np.where(np.isnan(job), node, job)

    def bottlenecked(self, host: FloatArray, gpu_mean: FloatArray) -> npt.NDArray[np.bool_]:
        return (host > self.p_float("io_threshold")) & (gpu_mean < self.p_float("gpu_threshold"))


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

    _cores: float | None = None

    def check(self, data: RuleInput) -> Part:
        self._cores = data.cores()
        return super().check(data)

    def columns(self, gpus: list[int]) -> list[str]:
        return [*super().columns(gpus), "proc_cpu"]

    def needs(self, gpus: list[int]) -> list[tuple[str, ...]]:
        return [("cpu",), tuple(f"gpu{g}_mem_util" for g in gpus)]

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        w, hits = self.windows_of(framed), []
        # The job's CPU, not the node's: on a shared host other processes' CPU says
        # nothing of what a larger batch would cost the job (the seed's dedicated
        # instance had no others). The node's when the job's is unknown.
        job = others_cpu(framed, self._cores)
        if job is not None:
            framed = framed.assign(cpu=framed["cpu"].astype("float64") - job)
        cols = ["cpu", *(f"gpu{g}_{m}" for g in gpus for m in ("util", "mem_util"))]
        p95 = w.quantiles(w.columns(framed, cols), [0.95])[:, 0, :]
        cpu_low = p95[:, 0] < self.p_float("cpu_threshold_p95")
        for i, g in enumerate(gpus):
            util, mem = p95[:, 1 + 2 * i], p95[:, 2 + 2 * i]
            low = (
                cpu_low
                & (util < self.p_float("gpu_threshold_p95"))
                & (mem < self.p_float("gpu_memory_threshold_p95"))
            )
            hits += w.hits(f"gpu{g}", util, low)
        return hits

    def finding(self, node: str, run: list[Hit]) -> Finding:
        value, threshold = worst_of(run, higher_is_worse=False), self.p_float("gpu_threshold_p95")
        text = (
            f"{run[0].key} on {node}: p95 GPU utilization {value:.0f}% with CPU and GPU memory "
            f"also below their p95 thresholds, for {lasted(run)}"
        )
        return run_finding(
            text, self.recommendation, run, value, threshold, 0.0, node=node, device=run[0].key
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

    def check(self, data: RuleInput) -> Part:
        # Too short for the patience: the diagnosis still says what the samples show.
        return with_loop_gpus(super().check(data), data, node_gpus(data))

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        w, hits = self.windows_of(framed), []
        q = w.quantiles(w.columns(framed, [f"gpu{g}_util" for g in gpus]), [0.05, 0.95])
        for i, g in enumerate(gpus):
            p5, p95 = q[:, 0, i], q[:, 1, i]
            hits += w.hits(f"gpu{g}:low", p95, p95 < self._p95)
            swing = np.where(p95 >= self._p95, p5, np.nan)
            hits += w.hits(f"gpu{g}:fluctuating", swing, swing < self._p5)
        return hits

    @property
    def _p95(self) -> float:
        return float(self.p_float("threshold_p95"))

    @property
    def _p5(self) -> float:
        return float(self.p_float("threshold_p5"))

    def finding(self, node: str, run: list[Hit]) -> Finding:
        device, kind = run[0].key.split(":")
        value = worst_of(run, higher_is_worse=False)
        low = kind == "low"
        threshold = self._p95 if low else self._p5
        what = "underused: p95 utilization" if low else "fluctuates: p5 utilization"
        text = f"{device} on {node} {what} {versus(value, threshold, '%', '<')} for {lasted(run)}"
        return run_finding(
            text, self.recommendation, run, value, threshold, 0.0, node=node, device=device
        )
