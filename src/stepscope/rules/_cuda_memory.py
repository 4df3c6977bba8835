"""CUDAMemory: the caching allocator's bytes per step (``cuda_allocated``,
``cuda_reserved``, ``cuda_peak``; docs/format.md) tell a leak from fragmentation
from a peak near the card's memory (docs/rules.md).

Per rank, the training steps with a reading after ``skip_steps`` are cut into
``windows`` consecutive groups; growth is the last group's median minus the first's
(medians: a step that briefly holds more, an evaluation's buffers, moves neither).

* **leak**: allocated bytes grew: tensors are kept across steps;
* **fragmentation**: reserved bytes grew while allocated did not (beyond it): the
  allocator keeps asking the driver for segments it cannot reuse;
* **out-of-memory risk**: the allocator's peak reached ``peak_share`` of the card.

The step where growth began is the first after which every reading stays above the
first readings' level (the median of the first three) by more than a fiftieth of
the growth.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis.downsample import FloatArray
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._params import Param
from stepscope.rules._types import Finding
from stepscope.rules._windows import severity

COLUMNS = ("cuda_allocated", "cuda_reserved", "cuda_peak")
GB = 1e9
LEAK = (
    "Look for tensors kept across steps: losses or outputs appended to a list without "
    ".item() or .detach(), caches that grow, graphs retained by backward(retain_graph=True); "
    "compare torch.cuda.memory_summary() of two steps, or record a memory snapshot "
    "(torch.cuda.memory._record_memory_history) and open it in pytorch.org/memory_viz."
)
FRAGMENTED = (
    "The allocator's pool fragments: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, "
    "keep tensor shapes steady between steps (pad variable-length batches to a few "
    "sizes), and avoid calling torch.cuda.empty_cache() inside the loop."
)
OOM = (
    "Leave headroom before an out-of-memory error: a smaller batch with gradient "
    "accumulation, activation checkpointing, bf16 autocast, or a sharded optimizer (FSDP, ZeRO)."
)


class CUDAMemory(NodeRule):
    """Per rank: a leak, fragmentation, or a peak near the card's memory, from the
    caching allocator's counters of the steps the agent read them at."""

    name = "CUDAMemory"
    description = (
        "CUDA memory of the caching allocator: allocated bytes growing (a leak), reserved "
        "bytes growing without them (fragmentation), or a peak near the card's memory."
    )
    recommendation = LEAK
    params = (
        Param("skip_steps", 10, "first training steps of each rank not judged (set-up)", int),
        Param("min_readings", 10, "steps with allocator readings a rank needs", int, minimum=4),
        Param(
            "windows",
            5,
            "consecutive groups of readings whose medians are compared",
            int,
            minimum=2,
        ),
        Param("growth", 10, "growth that fires, % of the first group's median", minimum=0.0),
        Param("min_growth_mb", 256, "least growth that fires, MB", minimum=0.0),
        Param("peak_share", 90, "allocator peak that fires, % of the card's memory"),
    )

    def check(self, data: RuleInput) -> Part:
        steps = data.steps
        if not len(steps) or any(c not in steps for c in COLUMNS):
            return Part(na_reason="no CUDA allocator readings (a CPU job, or an older agent)")
        train = steps[(steps["phase"] == "train") & steps["cuda_allocated"].notna()]
        train = train[train["step"] >= self.p_int("skip_steps")]
        part, unknown = Part(), list[object]()
        for rank, readings in train.groupby("rank", sort=True):
            enough = len(readings) >= self.p_int("min_readings")
            if enough and not self._judge(part, data, int(str(rank)), readings.sort_values("step")):
                unknown.append(int(str(rank)))
        if unknown:  # the out-of-memory risk is not judged without the card's size
            part.details["card_memory_unknown"] = unknown
        if not part.datapoints:
            return Part(
                na_reason=f"fewer than {self.p_int('min_readings')} training steps with CUDA "
                f"allocator readings after step {self.p_int('skip_steps')} on any rank"
            )
        return part

    def _judge(self, part: Part, data: RuleInput, rank: int, rows: pd.DataFrame) -> bool:
        """Judge one rank's readings; False when the card's memory is not known."""
        part.datapoints += len(rows)
        node = str(rows["node"].iloc[0]) if "node" in rows else None
        allocated = self._growth(rows, "cuda_allocated")
        reserved = self._growth(rows, "cuda_reserved")
        found: list[Finding] = []
        if allocated is not None:
            found.append(self._finding(node, rank, rows, "cuda_allocated", allocated))
        elif reserved is not None and self._beyond_allocated(rows, reserved[0]):
            found.append(self._finding(node, rank, rows, "cuda_reserved", reserved))
        total = card_memory(data, node, rows)
        peak = self._peak(node, rank, rows, total) if total is not None else None
        found += [peak] if peak is not None else []
        part.findings += found
        part.triggers += len(found)
        return total is not None

    def _beyond_allocated(self, rows: pd.DataFrame, reserved_rise: float) -> bool:
        """The reserve grew by ``min_growth_mb`` more than the allocations did."""
        allocated_rise = max(self._rise(rows, "cuda_allocated"), 0.0)
        return reserved_rise - allocated_rise >= self.p_float("min_growth_mb") * 1e6

    def _medians(self, rows: pd.DataFrame, column: str) -> FloatArray:
        values = rows[column].to_numpy(np.float64)
        groups = np.array_split(values, self.p_int("windows"))
        return np.array([np.median(g) for g in groups if len(g)])

    def _rise(self, rows: pd.DataFrame, column: str) -> float:
        medians = self._medians(rows, column)
        return float(medians[-1] - medians[0])

    def _growth(self, rows: pd.DataFrame, column: str) -> tuple[float, float] | None:
        """(growth, threshold) in bytes when ``column`` grew past the threshold."""
        first = float(self._medians(rows, column)[0])
        rise = self._rise(rows, column)
        threshold = max(self.p_float("min_growth_mb") * 1e6, self.p_float("growth") / 100 * first)
        return (rise, threshold) if rise >= threshold and rise > 0 else None

    def _finding(
        self,
        node: str | None,
        rank: int,
        rows: pd.DataFrame,
        column: str,
        growth: tuple[float, float],
    ) -> Finding:
        rise, threshold = growth
        values = rows[column].to_numpy(np.float64)
        steps = rows["step"].to_numpy(np.int64)
        began = int(steps[began_at(values, rise)])
        low, high = self._medians(rows, column)[[0, -1]] / GB
        what = "allocated" if column == "cuda_allocated" else "reserved"
        text = (
            f"rank {rank}: CUDA memory {what} grew by {rise / GB:.2f} GB from step {began} "
            f"(from {low:.2f} to {high:.2f} GB: medians of the first and last of "
            f"{self.p_int('windows')} groups of {len(values)} readings)"
        )
        if column == "cuda_allocated":
            text += ": tensors kept across steps (a leak)"
        else:
            allocated = self._medians(rows, "cuda_allocated")
            text += (
                f" while allocated stayed near {float(np.median(allocated)) / GB:.2f} GB: "
                "the allocator's pool fragments"
            )
        return Finding(
            text, LEAK if column == "cuda_allocated" else FRAGMENTED,
            severity(rise, threshold, 10 * threshold), node=node, device=_device(rows),
            rank=rank, start=_time(rows, began), steps=(began, int(steps[-1])),
            value=rise / GB, threshold=threshold / GB,
        )  # fmt: skip

    def _peak(
        self, node: str | None, rank: int, rows: pd.DataFrame, total: float
    ) -> Finding | None:
        share = self.p_float("peak_share")
        peaks = rows["cuda_peak"].to_numpy(np.float64)
        high = float(np.nanmax(peaks)) / total * 100
        if not high >= share:
            return None
        step = int(rows["step"].to_numpy(np.int64)[int(np.argmax(peaks >= share / 100 * total))])
        return Finding(
            f"rank {rank}: the CUDA allocator's peak reached {high:.0f}% of the card's "
            f"{total / GB:.1f} GB (at least {share:g}% from step {step}): one larger batch "
            "or sequence away from out of memory",
            OOM, severity(high, share, 100.0), node=node, device=_device(rows), rank=rank,
            start=_time(rows, step), steps=(step, int(rows["step"].iloc[-1])),
            value=high, threshold=share,
        )  # fmt: skip


def began_at(values: FloatArray, rise: float) -> int:
    """Index of the first reading after which all stay above the first readings'
    median by more than ``rise / 50``; where the last reading dips back (a leak whose
    last group still rose), the first reading above it."""
    base = float(np.median(values[:3]))
    above = values > base + rise / 50
    # the last reading not above, plus one: every reading after it is above
    below = np.flatnonzero(~above)
    if not len(below):
        return 0
    if int(below[-1]) + 1 < len(values):
        return int(below[-1]) + 1
    first = np.flatnonzero(above)
    return int(first[0]) if len(first) else 0


def card_memory(data: RuleInput, node: str | None, rows: pd.DataFrame) -> float | None:
    """The memory of the rank's card, bytes: the GPU of its local rank in the node's
    record, or the one size all its GPUs share; None when not known."""
    info = data.nodes.get(node or "")
    gpus = info.get("gpus") if info else None
    sizes = {
        int(g["index"]): float(g["mem_total"])
        for g in gpus or []
        if isinstance(g.get("mem_total"), int | float) and isinstance(g.get("index"), int)
    }
    local = int(rows["local_rank"].iloc[0]) if "local_rank" in rows else None
    if local is not None and local in sizes:
        return sizes[local]
    return next(iter(sizes.values())) if len(set(sizes.values())) == 1 else None


def _device(rows: pd.DataFrame) -> str | None:
    return f"gpu{int(rows['local_rank'].iloc[0])}" if "local_rank" in rows else None


def _time(rows: pd.DataFrame, step: int) -> float | None:
    at = rows.loc[rows["step"] == step, "end"]
    return float(at.iloc[0]) if len(at) else None
