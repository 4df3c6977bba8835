"""What feeding the loop faster can save: the idle cores' bound (docs/rules.md, "Saving").

More DataLoader workers move the loader's CPU work off the training thread; they do
not remove it. While the steps wait, the job uses ``job`` cores of the node and
``idle`` cores stay idle; the job may use at most ``room = min(usable, job + idle)``
cores (the cores the other processes leave, and its CPU affinity). The same work
over ``T`` seconds of steps then takes at least ``T * job / room`` seconds, so the
steps can be shorter by at most ``T * (1 - job / room)``: with no idle core,
nothing. Without the job's own CPU (an imported job) the node's busy CPU is taken
as the job's; without the node's CPU there is no bound (the whole wait).

A wait that uses no CPU (slow storage, a sleep) leaves the cores idle, and the bound
is then above the wait: the wait is what more workers save.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stepscope.analysis.diagnosis_text import cpu_text

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Saving:
    """At most ``seconds`` saved, and why (the text a message or the diagnosis gives)."""

    seconds: float
    why: str


def sample_mean(system: pd.DataFrame, column: str, start: float, end: float) -> float | None:
    """The mean of ``column`` over the samples in ``[start, end]`` (a rate whose mean
    over time is its total); None without any."""
    if column not in system or not len(system):
        return None
    t = system["time"]
    inside = system[(t >= start) & (t <= end)][column].dropna()
    return float(inside.mean()) if len(inside) else None


def idle_core_bound(
    system: pd.DataFrame,
    span: tuple[float, float],
    step_time: float,
    cores: float | None,
    usable: float | None = None,
) -> Saving | None:
    """The most that moving the loader's work onto other cores saves of ``step_time``
    seconds of steps in ``span``; None without the node's CPU or core count."""
    cpu = sample_mean(system, "cpu", *span)
    if cpu is None or not cores or step_time <= 0:
        return None
    idle = max(cores * (1.0 - cpu / 100.0), 0.0)
    proc = sample_mean(system, "proc_cpu", *span)  # % of one core, summed
    job = proc / 100.0 if proc is not None else cores * cpu / 100.0
    room = min(float(usable or cores), job + idle)
    seconds = step_time * max(1.0 - job / room, 0.0) if room > 0 else 0.0
    whose = "the job" if proc is not None else "the node (the job's own CPU unrecorded)"
    why = (
        f"more workers only use idle cores: {whose} used {cpu_text(100.0 * job / cores, cores, 0)}"
        f" of the node's CPU with {cpu_text(100.0 * idle / cores, cores, 0)} idle, and the "
        f"loader's work stays, so its {step_time:.1f} s of steps take at least "
        f"{step_time - seconds:.1f} s"
    )
    return Saving(seconds, why)


def bounded(cost: float, bound: Saving | None) -> tuple[float, str | None]:
    """The saving of a fix whose cost is ``cost``: the bound where it is lower (and
    why), else the whole cost (no reason needed)."""
    if bound is None or bound.seconds >= cost:
        return cost, None
    return bound.seconds, bound.why
