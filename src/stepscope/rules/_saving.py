"""What feeding the loop faster can save: the idle cores' bound (docs/rules.md, "Saving").

More DataLoader workers move the loader's CPU work off the training thread; they do
not remove it. While the steps wait, the job uses ``job`` cores of the node and
``idle`` cores stay idle. Workers (one per usable core, ``w``) take the idle cores,
and on a contended node their fair share of the busy ones: the scheduler shares the
cores among the runnable tasks (``run_queue``), of which the job's are ``job +
queued`` (running, and waiting for a core: ``proc_run_wait`` of the training
threads plus ``proc_pool_run_wait`` of the workers), so with the workers
the job gets about ``cores * (n + w) / (run_queue + w)`` cores. The job may use at
most ``room = min(usable, max(job + idle, that share))`` cores. The same work
over ``T`` seconds of steps then takes at least ``T * job / room`` seconds, so the
steps can be shorter by at most ``T * (1 - job / room)``: with no idle core,
nothing. Without the job's own CPU (an imported job) the node's busy CPU is taken
as the job's; without the node's CPU there is no bound (the whole wait).

Only the wait spent on a CPU needs the cores: of a wait ``W``, at least
``W - T * (job + queued)`` was spent off the CPU (a sleep, slow storage: the job's
CPU seconds hold all its waits' CPU, ``queued`` its training threads' and workers'
run-queue wait: a worker waiting for a core is no wait off the CPU), and workers
overlap that part without cores. The bound is
``min(W, max(W - T * (job + queued), 0) + T * (1 - job / room))``: a sleeping loader
saves its wait on a busy node, a decoding one only what the idle cores absorb.

How the busy cores are shared depends on the scheduler (``sched_autogroup`` in
``nodes/<node>.json``). Autogroup off: among all runnable tasks, as above. Autogroup
on (Linux's default on many machines): among sessions first, each session's
autogroup weighing as one task, then among a group's tasks. So only competitors in
the job's autogroup (``others_cpu_group``, of the others' ``others``) share by task
with the new workers; those of other groups keep their CPU (``apart``), or give
back what the job's group takes on the cores its tasks run on, where it weighs as one
group beside each core's part of the others: the job's group gets ``group =
max(cores - apart, spread * cores / (cores + rivals))`` cores, ``spread = min(n + w,
cores)``, ``rivals = max(groups, apart)``, ``groups`` the other busy autogroups
(``others_groups``), and the job's tasks, with
``n`` of its own, ``m`` of the same group's competitors (the others' runnable tasks,
``run_queue - n``, in proportion to their CPU) and ``w`` workers, get about ``group
* (n + w) / (n + m + w)``. Autogroup off is the case ``apart = 0``. Without the split
(older jobs) or without knowing the scheduler, other processes keep what they use
and only idle cores count; without ``run_queue`` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from stepscope.analysis.diagnosis_text import cpu_text

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.rules._input import RuleInput


@dataclass(frozen=True)
class Saving:
    """At most ``seconds`` saved, and why (the text a message or the diagnosis gives);
    ``off_cpu``: the seconds of the wait spent at least off the CPU (a sleep, storage)."""

    seconds: float
    why: str
    off_cpu: float = 0.0


def sample_mean(system: pd.DataFrame, column: str, start: float, end: float) -> float | None:
    """The mean of ``column`` over the samples in ``[start, end]`` (a rate whose mean
    over time is its total); None without any."""
    if column not in system or not len(system):
        return None
    t = system["time"]
    # The column, then its rows: masking the wide frame first copied every column of a
    # day of samples (tens of MB) for one mean.
    inside = system[column][(t >= start) & (t <= end)].dropna()
    return float(inside.mean()) if len(inside) else None


@dataclass(frozen=True)
class _Others:
    """Other processes' busy cores: ``same`` in the job's autogroup (all of them with
    autogroup off), ``apart`` in other groups, ``groups`` busy other groups (None:
    unknown), ``known``: whether who shares with the job is known."""

    same: float
    apart: float
    groups: float | None
    known: bool


def _others(
    system: pd.DataFrame, span: tuple[float, float], others: float, autogroup: bool | None
) -> _Others:
    if autogroup is False:
        return _Others(others, 0.0, None, True)
    same = _span_or_job(system, "others_cpu_group", span) if autogroup else None
    if same is None:  # unknown: the others keep what they use
        return _Others(0.0, others, None, False)
    same = min(same / 100.0, others)
    return _Others(same, others - same, _span_or_job(system, "others_groups", span), True)


def _span_or_job(system: pd.DataFrame, column: str, span: tuple[float, float]) -> float | None:
    """The mean of ``column`` in ``span``, else over the job: the columns of a scan of
    the other processes are written every few seconds only."""
    inside = sample_mean(system, column, *span)
    return inside if inside is not None else sample_mean(system, column, -np.inf, np.inf)


def idle_core_bound(
    system: pd.DataFrame,
    span: tuple[float, float],
    times: tuple[float, float],
    cores: float | None,
    usable: float | None = None,
    autogroup: bool | None = None,
) -> Saving | None:
    """The most that moving the loader's work onto other cores saves of ``times``
    (``step_time`` seconds of steps in ``span``, ``wait`` of them waiting for data);
    None without the node's CPU or core count. ``autogroup``: the node's scheduler
    shares busy cores among sessions first (None: unknown; see ``autogroup_of``)."""
    step_time, wait = times
    cpu = sample_mean(system, "cpu", *span)
    if cpu is None or not cores or step_time <= 0:
        return None
    busy = cores * cpu / 100.0
    idle = max(cores - busy, 0.0)
    proc = sample_mean(system, "proc_cpu", *span)  # % of one core, summed
    job = proc / 100.0 if proc is not None else busy
    # the job's tasks waiting for a core: the main threads and the workers'
    waits = (sample_mean(system, c, *span) for c in ("proc_run_wait", "proc_pool_run_wait"))
    queued = sum(w or 0.0 for w in waits) / 100.0
    own = (sample_mean(system, "own_cpu", *span) or 0.0) / 100.0
    others = _others(system, span, max(busy - job - own, 0.0), autogroup)
    share = _fair_share(system, span, job + queued, cores, usable, others)
    room = min(float(usable or cores), max(job + idle, share))
    on_cores = step_time * max(1.0 - job / room, 0.0) if room > 0 else 0.0
    off_cpu = max(wait - step_time * (job + queued), 0.0)
    seconds = min(wait, off_cpu + on_cores)
    whose = "the job" if proc is not None else "the node (the job's own CPU unrecorded)"
    used = f"{whose} used {cpu_text(100.0 * job / cores, cores, 0)} of the node's CPU"
    if share > job + idle:  # contended: the workers would take CPU from the others
        fair = "its fair share" + ("" if autogroup is False else " in its session's autogroup")
        where = f"{used}, and workers would get it about {room:.2f} cores in all ({fair})"
    else:
        where = f"{used} with {cpu_text(100.0 * idle / cores, cores, 0)} idle"
    only = "idle cores or a fair share of busy ones" if others.known else "idle cores"
    why = (
        f"more workers only use {only}: {where}; the "
        f"loader's CPU work stays, so its {step_time:.1f} s of steps take at least "
        f"{step_time - seconds:.1f} s"
    )
    return Saving(seconds, why, off_cpu)


def _fair_share(
    system: pd.DataFrame,
    span: tuple[float, float],
    runnable: float,
    cores: float,
    usable: float | None,
    others: _Others,
) -> float:
    """The cores the job gets with a worker per usable core added to its ``runnable``
    tasks: its autogroup's cores shared by task (0 without ``run_queue``, or without
    knowing who shares with the job)."""
    queue = sample_mean(system, "run_queue", *span)
    if queue is None or not others.known:
        return 0.0
    workers = float(usable or cores)
    group = cores - others.apart
    if others.groups:  # the job's group takes back its share of each core it runs on
        group = max(group, _group_share(runnable + workers, cores, others))
    total = others.same + others.apart
    mates = max(queue - runnable, 0.0) * (others.same / total if total > 0 else 0.0)
    return group * (runnable + workers) / (runnable + mates + workers)


def _group_share(tasks: float, cores: float, others: _Others) -> float:
    """The cores the job's autogroup gets against the other busy groups with ``tasks``
    runnable: on each core it runs on (``spread``, one per task) it weighs as one group
    beside that core's part of the ``rivals`` (each busy group on at least one core,
    each busy core of theirs at least one group). Measured (docs/rules.md): one worker
    beside a busy loop per core, each in a session of its own, got 0.71 core, two 1.05:
    more than an equal share of the groups (0.67), as the kernel weighs a group on each
    core by its load there."""
    spread = min(tasks, cores)
    rivals = max(float(others.groups or 0), others.apart)
    return spread * cores / (cores + rivals)


def autogroup_of(data: RuleInput) -> bool | None:
    """Whether every node of ``data`` shares busy cores among sessions first (autogroup
    on: True) or among tasks (off: False); None where a node does not say or they differ."""
    flags = {info.get("sched_autogroup") for info in data.nodes.values()}
    return flags.pop() if len(flags) == 1 and flags <= {True, False} else None


def bounded(cost: float, bound: Saving | None) -> tuple[float, str | None]:
    """The saving of a fix whose cost is ``cost``: the bound where it is lower (and
    why), else the whole cost (no reason needed)."""
    if bound is None or bound.seconds >= cost:
        return cost, None
    return bound.seconds, bound.why
