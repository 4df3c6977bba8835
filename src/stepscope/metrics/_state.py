"""What ``/metrics`` shows of one job: running totals kept from the rows as they come.

:class:`JobMetrics` takes a job's new rows (the live rule runner's reads, or a whole
read in ``stepscope ui``) and rule verdicts, and keeps only bounded state per
series: a histogram, sums and the last step ends per ``(node, rank, phase)``, the
newest sample per node, a status and the finding keys seen per rule. Its cost does
not grow with the job's age, and a scrape never reads the job folder.
"""

from __future__ import annotations

import itertools
import math
import statistics
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy comes with the first rows: the runner serves before it reads
    import numpy as np
    import pandas as pd

# Step time buckets, seconds: from a 5 ms inference step to a minute-long one.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
PARTS = ("data_wait", "forward", "backward", "optimizer", "other")
PHASES = ("train", "eval")  # the agent's phases; anything else is shown as "other"
RECENT_STEPS = 33  # step ends kept per series: throughput is 1 / median of 32 intervals
# The rule status gauge: a number per verdict (docs/integrations.md).
STATUS_VALUES = {"NoIssuesFound": 0, "IssuesFound": 1, "NotApplicable": -1, "Error": -2}
# System gauges: metric name -> (column, help). GPU ones are per gpu<i>_ column.
SYSTEM_GAUGES = {
    "stepscope_cpu_percent": ("cpu", "CPU utilization of the node, % of all cores"),
    "stepscope_memory_used_bytes": ("mem_used", "Memory used on the node, bytes"),
    "stepscope_memory_percent": ("mem_percent", "Memory used on the node, % of total"),
}
GPU_GAUGES = {
    "stepscope_gpu_utilization_percent": ("util", "GPU utilization, %"),
    "stepscope_gpu_memory_used_bytes": ("mem_used", "GPU memory used, bytes"),
    "stepscope_gpu_memory_total_bytes": ("mem_total", "GPU memory in all, bytes"),
}
StepKey = tuple[str, int, str]  # node, rank, phase


@dataclass
class StepSeries:
    """Totals of one ``(node, rank, phase)``: a step time histogram and the split."""

    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    count: int = 0
    total_s: float = 0.0
    parts_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    ends: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_STEPS))

    def add(self, count: int, total_s: float, below: list[int], parts: dict[str, float],
            ends: list[float]) -> None:  # fmt: skip
        """Steps of this series: how many, their seconds, how many at or below each
        bucket's bound, the split's sums, their last ends (ascending)."""
        self.count += count
        self.total_s += total_s
        self.buckets = [have + n for have, n in zip(self.buckets, below, strict=True)]
        for name, seconds in parts.items():
            self.parts_s[name] += seconds
        self.ends.extend(ends)

    def steps_per_second(self) -> float | None:
        """1 / the median interval between the last step ends (None: too few steps)."""
        ends = sorted(self.ends)
        gaps = [b - a for a, b in itertools.pairwise(ends) if b > a]
        return 1.0 / statistics.median(gaps) if gaps else None


@dataclass
class RuleState:
    status: str = "NotApplicable"
    findings: set[str] = field(default_factory=set)


class JobMetrics:
    """The running totals of one job; thread-safe (a scrape reads while a scan adds)."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.steps: dict[StepKey, StepSeries] = {}
        self.system: dict[str, dict[str, float]] = {}  # node -> column -> newest value
        self.rules: dict[str, RuleState] = {}
        self.lock = threading.Lock()

    def add_rows(self, kind: str, frame: pd.DataFrame | None) -> None:
        """New rows of a stream (``steps`` or ``system``; other kinds are ignored)."""
        if frame is None or not len(frame):
            return
        with self.lock:
            if kind == "steps":
                self._add_steps(frame)
            elif kind == "system":
                self._add_system(frame)

    def _add_steps(self, frame: pd.DataFrame) -> None:
        """Per series sums in a few array passes: a scan of 64 ranks' rows adds each
        rank's in microseconds, not a pandas group's milliseconds."""
        import numpy as np

        frame = frame[frame["duration"].notna()]  # no duration: nothing of step time
        if not len(frame):
            return
        codes, keys = _series_codes(frame)
        n, dur = len(keys), frame["duration"].to_numpy("float64")
        count, total = np.bincount(codes, minlength=n), np.bincount(codes, dur, n)
        below = np.stack([np.bincount(codes, dur <= b, n) for b in BUCKETS], axis=1)
        parts = {p: np.bincount(codes, np.nan_to_num(frame[p].to_numpy("float64")), n)
                 for p in PARTS if p in frame.columns}  # fmt: skip
        ends = frame["end"].to_numpy("float64")
        order = np.lexsort((ends, codes))  # by series, then end
        stops = np.cumsum(count)
        for i, (node, rank, ph) in enumerate(keys):
            last = order[max(stops[i] - count[i], stops[i] - RECENT_STEPS) : stops[i]]
            self.steps.setdefault((str(node), int(rank), str(ph)), StepSeries()).add(
                int(count[i]), float(total[i]), [int(x) for x in below[i]],
                {p: float(v[i]) for p, v in parts.items()}, ends[last].tolist(),
            )  # fmt: skip

    def _add_system(self, frame: pd.DataFrame) -> None:
        wanted = [c for c in frame.columns if c in _SYSTEM_COLUMNS or c.startswith("gpu")]
        for node, rows in frame.groupby("node", sort=False):
            newest = self.system.setdefault(str(node), {})
            for col in wanted:
                values = rows[col].dropna()  # a missing sample is not a zero
                if len(values) and (value := _number(values.iloc[-1])) is not None:
                    newest[col] = value

    def set_rule(self, rule: str, status: str, finding_keys: Iterable[str]) -> None:
        """A rule's verdict now and the keys of its findings (counted once each)."""
        with self.lock:
            state = self.rules.setdefault(rule, RuleState())
            state.status = status
            state.findings.update(finding_keys)


def _series_codes(frame: pd.DataFrame) -> tuple[np.ndarray, list[StepKey]]:
    """Each row's series as a code 0..n-1, and the n series: one integer per row made
    of node, rank and phase, then ``np.unique`` (pandas' groupby costs 1 ms a group)."""
    import numpy as np
    import pandas as pd

    nodes, names = pd.factorize(frame["node"])
    ranks = frame["rank"].to_numpy("int64")
    phase = frame["phase"].to_numpy(object)
    labels = ("other", *PHASES)  # code 0: a phase the agent does not write
    phases = sum(i * (phase == p) for i, p in enumerate(labels) if i)
    width = int(ranks.max()) + 1
    found, codes = np.unique((nodes * width + ranks) * len(labels) + phases, return_inverse=True)
    keys = []
    for k in found.tolist():
        node_rank, ph = divmod(k, len(labels))
        node, rank = divmod(node_rank, width)
        keys.append((str(names[node]), rank, labels[ph]))
    return codes, keys


_SYSTEM_COLUMNS = {column for column, _ in SYSTEM_GAUGES.values()}


def _number(value: object) -> float | None:
    """A finite float, or None for a missing (null, NaN) value."""
    if value is None or isinstance(value, str):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
