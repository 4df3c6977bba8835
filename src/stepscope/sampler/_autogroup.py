"""Which other processes share the job's autogroup: ``others_cpu_group`` and
``others_groups`` of ``system/<node>/`` (docs/format.md; the model: docs/rules.md,
"Saving").

Linux's autogroup gives each session (``setsid``) a task group of its own under the
root one, weighted by the autogroup's nice (0: as one nice-0 task). Where it is on
(``/proc/sys/kernel/sched_autogroup_enabled``), CFS shares the busy cores between the
groups first and among a group's tasks second, so the job's workers compete by task
only with the processes of its own session; another session keeps its group's share
however many tasks the job adds. ``/proc/<pid>/autogroup`` names a process's group
(``/autogroup-17 nice 0``); it is empty for a process of the root group (kernel
threads, init's session), each of whose tasks competes on its own at the top level.

At each scan of the other processes the sampler sums the CPU of those in the job's
autogroup and counts the other groups busy beside it (a root-group process counts
as one). Only processes that used CPU since the last scan are read: one small file
each.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

ROOT_GROUP = ""  # /proc/<pid>/autogroup of a process in the root task group


def autogroup(pid: int) -> str | None:
    """The autogroup of ``pid`` (``/autogroup-N``; ``ROOT_GROUP`` for the root group),
    None where the kernel has no autogroup (the file is absent) or ``pid`` exited."""
    try:
        with open(f"/proc/{pid}/autogroup", "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    return text.split(" ", 1)[0].strip()


@dataclass(frozen=True)
class GroupSplit:
    """Other processes' CPU in the job's autogroup (% of one core, summed) and the
    number of other autogroups busy beside it (each at least ``min_cpu``)."""

    same_cpu: float
    groups: int


def split_by_group(
    job_pid: int | None, used: Iterable[tuple[float, int]], min_cpu: float
) -> GroupSplit | None:
    """Split the others' ``used`` (CPU % of one core, pid) by the job's autogroup;
    None where the job's group cannot be read (no autogroup, no job, it exited)."""
    job = autogroup(job_pid) if job_pid is not None else None
    if job is None:
        return None
    same, busy_groups, root_tasks = 0.0, set(), 0
    for cpu, pid in used:
        if cpu <= 0:
            continue
        group = autogroup(pid)
        if group is None:
            continue  # exited since its CPU was read
        if group == job:
            same += cpu
        elif cpu >= min_cpu:
            if group == ROOT_GROUP:
                root_tasks += 1
            else:
                busy_groups.add(group)
    return GroupSplit(same, len(busy_groups) + root_tasks)
