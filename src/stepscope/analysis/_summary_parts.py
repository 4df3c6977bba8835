"""The steps and system sections of a job's summary (:mod:`.summary`), as plain data:
counts, duration quantiles and split per phase of rank 0, and each node's samples.

Computed with numpy over the columns :mod:`.summary` read with pyarrow (no DuckDB,
no pandas).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NotRequired, SupportsFloat, TypedDict

import numpy as np

from stepscope.analysis._arrow import Columns
from stepscope.analysis.device import DEVICE_COLUMNS, DeviceSplit, device_split
from stepscope.analysis.downsample import FloatArray
from stepscope.analysis.host import others_cpu_values, per_core_columns
from stepscope.jobfolder import STEP_PARTS

if TYPE_CHECKING:
    import numpy.typing as npt

    from stepscope.read import Job

SPLIT = (*STEP_PARTS, "other")
_ID_COLUMNS = ("time", "node", "interval_ms")


class Quantiles(TypedDict):
    """The median and 95th percentile of a series (None without values)."""

    p50: float | None
    p95: float | None


class PhaseSummary(TypedDict):
    """The steps of one phase of rank 0: how many, how long, where the time went.

    ``split`` is the host's; ``device`` (only where the steps have device times,
    :func:`stepscope.analysis.device.device_split`) is the GPU's.
    """

    count: int
    duration: Quantiles
    split: dict[str, float | None]
    split_p50: dict[str, float | None]
    device: NotRequired[DeviceSplit]


class StepsSummary(TypedDict):
    """Training steps of rank 0, steps per rank, and each phase of rank 0."""

    count: int
    by_rank: dict[str, int]
    phases: dict[str, PhaseSummary]


class NodeSummary(TypedDict):
    """One node's system samples: how many, how often, each metric's quantiles."""

    samples: int
    interval_ms: int | None
    metrics: dict[str, Quantiles]
    cores: int | None  # the node's per-core columns: what "% of the node" is a share of


class SystemSummary(TypedDict):
    """The first node's sample count and interval, and every node's summary."""

    samples: int
    interval_ms: int | None
    nodes: dict[str, NodeSummary]


def _num(x: SupportsFloat | None) -> float | None:
    """A JSON-safe float (NaN, infinities and missing become None)."""
    if x is None:
        return None
    f = float(x)
    return round(f, 6) if math.isfinite(f) else None


def _quantiles(values: FloatArray) -> Quantiles:
    values = values[~np.isnan(values)]
    if not len(values):
        return {"p50": None, "p95": None}
    p50, p95 = np.quantile(values, [0.5, 0.95])
    return {"p50": _num(p50), "p95": _num(p95)}


def _phase_summary(steps: Columns, rows: npt.NDArray[np.bool_]) -> PhaseSummary:
    total = float(np.nansum(steps.floats("duration")[rows])) or 1.0
    split: dict[str, float | None] = {}
    split_p50: dict[str, float | None] = {}
    for part in SPLIT:  # a part the job did not record is unknown, not zero
        values = steps.floats(part)[rows]
        # a part never measured (an imported job's optimizer) is None, not 0 %
        known = part in steps.names and not np.isnan(values).all()
        split[part] = _num(np.nansum(values) / total) if known else None
        split_p50[part] = _quantiles(values)["p50"] if known else None
    summary: PhaseSummary = {
        "count": int(rows.sum()),
        "duration": _quantiles(steps.floats("duration")[rows]),
        "split": split,
        "split_p50": split_p50,
    }
    names = ("duration", *DEVICE_COLUMNS.values())
    device = device_split({name: steps.floats(name)[rows] for name in names})
    if device is not None:  # a CPU job's summary stays as it was
        summary["device"] = device
    return summary


def steps_summary(steps: Columns) -> StepsSummary:
    """Counts per rank and phase; duration quantiles and split (rank 0) per phase."""
    phase, rank = steps.strings("phase"), steps.floats("rank")
    train = phase == "train"
    rank0 = float(np.nanmin(rank)) if steps.rows and not np.isnan(rank).all() else 0.0
    mine = rank == rank0
    ranks, counts = np.unique(rank[train & ~np.isnan(rank)], return_counts=True)
    phases = sorted({p for p in phase[mine] if isinstance(p, str)})
    return {
        "count": int((train & mine).sum()),
        "by_rank": {str(int(r)): int(n) for r, n in zip(ranks, counts, strict=True)},
        "phases": {ph: _phase_summary(steps, mine & (phase == ph)) for ph in phases},
    }


def _node_summary(system: Columns, rows: npt.NDArray[np.bool_]) -> NodeSummary:
    metrics = {}
    for name in system.names:
        if name not in _ID_COLUMNS:
            values = system.floats(name)[rows]
            if not np.isnan(values).all():
                metrics[name] = _quantiles(values)
    cores = per_core_columns(system.names)
    if cores and "cpu" in system.names and "proc_cpu" in system.names:
        cpu, job = system.floats("cpu")[rows], system.floats("proc_cpu")[rows]
        own = system.floats("own_cpu")[rows] if "own_cpu" in system.names else None
        others = others_cpu_values(cpu, job, cores, own)
        if not np.isnan(others).all():
            metrics["others_cpu"] = _quantiles(others)
        if not np.isnan(job).all():  # proc_cpu is % of one core: also as % of the node
            metrics["proc_cpu_node"] = _quantiles(job / cores)
        if own is not None and not np.isnan(own).all():  # so is own_cpu
            metrics["own_cpu_node"] = _quantiles(own / cores)
    times, intervals = system.floats("time")[rows], system.floats("interval_ms")[rows]
    last = intervals[np.argmax(times)] if len(times) else math.nan  # the newest sample's
    return {
        "samples": int(rows.sum()),
        "interval_ms": None if math.isnan(last) else int(last),
        "metrics": metrics,
        "cores": cores or None,
    }


def system_summary(job: Job) -> SystemSummary:
    """Each node's samples and metric quantiles; the first node's count and interval."""
    system = Columns(job.arrow("system"))
    node = system.strings("node")
    nodes: dict[str, NodeSummary] = {
        str(n): _node_summary(system, node == n)
        for n in sorted({n for n in node if isinstance(n, str)})
    }
    first = next(iter(nodes.values()), None)
    if first is None:
        return {"samples": 0, "interval_ms": None, "nodes": nodes}
    return {"samples": first["samples"], "interval_ms": first["interval_ms"], "nodes": nodes}
