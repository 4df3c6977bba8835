"""What feeding the loop faster can save: the idle cores' bound (docs/rules.md, "Saving").

More DataLoader workers move the loader's CPU work off the training thread; they do
not remove it. While the steps wait, the job uses ``job`` cores of the node and
``idle`` cores stay idle. Workers (one per usable core, ``w``) take the idle cores,
and on a contended node their fair share of the busy ones: the scheduler shares the
cores among the runnable tasks (``run_queue``), of which the job's are ``job +
queued`` (running, and waiting for a core: ``proc_run_wait``), so with the workers
the job gets about ``cores * (n + w) / (run_queue + w)`` cores. The job may use at
most ``room = min(usable, max(job + idle, that share))`` cores. The same work
over ``T`` seconds of steps then takes at least ``T * job / room`` seconds, so the
steps can be shorter by at most ``T * (1 - job / room)``: with no idle core,
nothing. Without the job's own CPU (an imported job) the node's busy CPU is taken
as the job's; without the node's CPU there is no bound (the whole wait).

Only the wait spent on a CPU needs the cores: of a wait ``W``, at least
``W - T * (job + queued)`` was spent off the CPU (a sleep, slow storage: the job's
CPU seconds hold all its waits' CPU, ``queued`` is its training threads' run-queue
wait, ``proc_run_wait``), and workers overlap that part without cores. The bound is
``min(W, max(W - T * (job + queued), 0) + T * (1 - job / room))``: a sleeping loader
saves its wait on a busy node, a decoding one only what the idle cores absorb.

The fair share holds only where the scheduler shares the cores among tasks. Linux's
autogroup (on by default on desktops and many servers) shares them among sessions
first: a job's extra workers then split its session's share, and other sessions'
load keeps theirs. Measured (benchmarks/diagnosis.py, loader-fix under load): the
fair share claimed 4.5 s where a second worker saved 0.9 s. So the fair share is
used only on a node that records autogroup off (``sched_autogroup`` in
``nodes/<node>.json``); elsewhere only idle cores count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stepscope.analysis.diagnosis_text import cpu_text

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.rules._input import RuleInput


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
    times: tuple[float, float],
    cores: float | None,
    usable: float | None = None,
    fair: bool = True,
) -> Saving | None:
    """The most that moving the loader's work onto other cores saves of ``times``
    (``step_time`` seconds of steps in ``span``, ``wait`` of them waiting for data);
    None without the node's CPU or core count. ``fair``: busy cores are shared among
    tasks (see ``shared_by_task``)."""
    step_time, wait = times
    cpu = sample_mean(system, "cpu", *span)
    if cpu is None or not cores or step_time <= 0:
        return None
    idle = max(cores * (1.0 - cpu / 100.0), 0.0)
    proc = sample_mean(system, "proc_cpu", *span)  # % of one core, summed
    job = proc / 100.0 if proc is not None else cores * cpu / 100.0
    queued = (sample_mean(system, "proc_run_wait", *span) or 0.0) / 100.0
    share = _fair_share(system, span, job + queued, cores, usable) if fair else 0.0
    room = min(float(usable or cores), max(job + idle, share))
    on_cores = step_time * max(1.0 - job / room, 0.0) if room > 0 else 0.0
    seconds = min(wait, max(wait - step_time * (job + queued), 0.0) + on_cores)
    whose = "the job" if proc is not None else "the node (the job's own CPU unrecorded)"
    used = f"{whose} used {cpu_text(100.0 * job / cores, cores, 0)} of the node's CPU"
    if share > job + idle:  # contended: the workers would take CPU from the others
        where = f"{used}, and workers would get it about {room:.2f} cores in all (its fair share)"
    else:
        where = f"{used} with {cpu_text(100.0 * idle / cores, cores, 0)} idle"
    only = "idle cores or a fair share of busy ones" if fair else "idle cores"
    why = (
        f"more workers only use {only}: {where}; the "
        f"loader's CPU work stays, so its {step_time:.1f} s of steps take at least "
        f"{step_time - seconds:.1f} s"
    )
    return Saving(seconds, why)


def _fair_share(
    system: pd.DataFrame,
    span: tuple[float, float],
    runnable: float,
    cores: float,
    usable: float | None,
) -> float:
    """The cores the job gets with a worker per usable core added to its ``runnable``
    tasks, when the node's runnable tasks share its cores (0 without ``run_queue``)."""
    queue = sample_mean(system, "run_queue", *span)
    if queue is None:
        return 0.0
    workers = float(usable or cores)
    return cores * (runnable + workers) / (max(queue, runnable) + workers)


def shared_by_task(data: RuleInput) -> bool:
    """Whether every node of ``data`` records that its scheduler shares busy cores among
    tasks (autogroup off): only then do more workers get a larger share."""
    flags = [info.get("sched_autogroup") for info in data.nodes.values()]
    return bool(flags) and all(flag is False for flag in flags)


def bounded(cost: float, bound: Saving | None) -> tuple[float, str | None]:
    """The saving of a fix whose cost is ``cost``: the bound where it is lower (and
    why), else the whole cost (no reason needed)."""
    if bound is None or bound.seconds >= cost:
        return cost, None
    return bound.seconds, bound.why
