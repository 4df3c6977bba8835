"""StepOutlier's view of the host: other processes' CPU and the wait for a core.

An outlier step may be slow because its rank waited, runnable, for a core that
other work held. These helpers measure that wait and that CPU during the flagged
steps, and word it in the finding; :class:`~stepscope.rules.StepOutlier` decides
what it excuses.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis.diagnosis_text import cpu_text
from stepscope.analysis.downsample import FloatArray
from stepscope.analysis.host import others_during, run_wait_in
from stepscope.rules._input import RuleInput


def node_cores(data: RuleInput, flagged: pd.DataFrame) -> float | None:
    """The cores of the flagged steps' node (None: unknown)."""
    if not len(flagged):
        return None
    return data.cores(str(flagged["node"].iloc[0]))


def others_cpu(data: RuleInput, flagged: pd.DataFrame) -> FloatArray:
    """Other processes' CPU (% of the node) during each flagged step: NaN unknown."""
    if not len(flagged) or not len(data.system):
        return np.full(len(flagged), np.nan)
    starts, ends = flagged["start"].to_numpy(np.float64), flagged["end"].to_numpy(np.float64)
    return others_during(data.system, starts, ends, node_cores(data, flagged))


def core_wait(data: RuleInput, flagged: pd.DataFrame) -> FloatArray:
    """Seconds each flagged step's rank waited, runnable, for a core inside the step
    (NaN: unknown): its threads' run-queue wait over the sampling intervals the step
    overlaps, cut at its ends (:func:`~stepscope.analysis.host.run_wait_in`), over
    the node's ranks (their processes' waits are summed). A stall spent asleep
    waits for no core: it is not excused."""
    if not len(flagged):
        return np.full(0, np.nan)
    starts, ends = flagged["start"].to_numpy(np.float64), flagged["end"].to_numpy(np.float64)
    ranks = max(1, int(data.steps["rank"].nunique()))  # the node's ranks share the sum
    return run_wait_in(data.system, starts, ends) / ranks


def usual_wait(data: RuleInput, judged: pd.DataFrame) -> float:
    """The median wait for a core of the steps that are no outliers (0: unknown)."""
    usual = judged.loc[~judged["outlier"].to_numpy(), ["node", "start", "end"]]
    waits = core_wait(data, usual) if len(usual) else np.full(0, np.nan)
    known = waits[np.isfinite(waits)]
    return float(np.median(known)) if len(known) else 0.0


def host_text(
    excess: float,
    margin: float,
    others: float,
    waited_s: float,
    extra: float,
    *,
    cores: float | None,
    threshold: float,
) -> str:
    """What the host did during an outlier step, for its finding ("" when nothing):
    other processes' CPU at or over ``threshold``, and the wait for a core."""
    # Flagged, not dropped: the step was slow all the same, but the host may be why.
    busy = others >= threshold  # False when NaN
    used = cpu_text(others, cores, 0)  # CPU in one unit: % of the node (cores)
    host = f"; other processes used {used} of the node's CPU meanwhile" if busy else ""
    # ``extra``: its wait beyond a usual step's (the baseline holds that); NaN unknown
    usual = f" ({extra:.3f} s more than a usual step)" if extra < waited_s else ""
    if abs(excess) - extra < margin:  # False when NaN
        host += f"; it waited {waited_s:.3f} s for a core: host contention, not counted"
    elif extra >= 0.1 * abs(excess):
        left = abs(excess) - extra
        host += f"; it waited {waited_s:.3f} s for a core{usual}, its own {left:.3f} s counted"
    return host
