"""One cheap pass over a process tree's threads in procfs, at every sample.

For each process of the tree, :func:`scan_tree` lists ``/proc/<pid>/task`` and reads
each thread's ``stat`` (its state: ``R`` running or runnable, ``D`` disk sleep) and
``children`` (the processes it started): a few small files per thread, about 20 us
each. It gives at once the tree's members (so a DataLoader worker is found at the
first sample after its ``fork``, not up to a second later) and how many of their
threads wait for the disk at this instant (``proc_io_wait``, docs/format.md).

Delay accounting (``kernel.task_delayacct``), which would give each thread's I/O wait
as a time, is off by default; the thread states are a snapshot, and a window of
samples estimates the share of time the job spends waiting on I/O.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

_TICK = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


@dataclass
class TreeScan:
    """The tree of one sample: members' pids (root first), start times, thread states."""

    pids: list[int] = field(default_factory=list)
    started: dict[int, float] = field(default_factory=dict)  # pid -> s since boot
    running: int = 0  # threads running or runnable (R)
    disk: int = 0  # threads in uninterruptible (disk) sleep (D)
    complete: bool = True  # False: a kernel without the ``children`` files


def boot_clock() -> float:
    """Seconds since boot, on the clock of procfs' start times (CLOCK_BOOTTIME)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else 0.0


def scan_tree(root: int) -> TreeScan | None:
    """Members and thread states of ``root``'s tree; None without procfs (not Linux)."""
    if not os.path.isdir(f"/proc/{root}/task"):
        return None
    scan, todo = TreeScan(), [root]
    while todo:
        pid = todo.pop()
        kids = _scan_process(pid, scan)
        if kids is not None:
            scan.pids.append(pid)
            todo += kids
    return scan


def _scan_process(pid: int, scan: TreeScan) -> list[int] | None:
    """Counts ``pid``'s threads into ``scan``; its children's pids, None if it has exited."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    kids: list[int] = []
    for tid in tids:
        stat = _read(f"/proc/{pid}/task/{tid}/stat")
        if stat is None:
            continue  # the thread has ended
        # The name (field 2) may hold spaces and parentheses: fields follow the last ")".
        fields = stat[stat.rfind(b")") + 2 :].split()
        state = fields[0:1]
        scan.running += state == [b"R"]
        scan.disk += state == [b"D"]
        if tid == str(pid) and len(fields) > 19:
            scan.started[pid] = int(fields[19]) * _TICK  # field 22: start, ticks since boot
        children = _read(f"/proc/{pid}/task/{tid}/children")
        if children is None:
            scan.complete &= not os.path.exists(f"/proc/{pid}/task/{tid}/stat")
            continue
        kids += [int(k) for k in children.split()]
    return kids


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def descendant_pids(pid: int) -> list[int] | None:
    """Pids of every descendant of ``pid``, from procfs; None where procfs lacks them."""
    out: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # it has exited
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", "rb") as f:
                    kids = [int(k) for k in f.read().split()]
            except FileNotFoundError:
                if not os.path.exists(f"/proc/{parent}/task/{tid}"):
                    continue  # the thread has ended
                return None  # a kernel without CONFIG_PROC_CHILDREN
            except OSError:
                continue
            out += kids
            todo += kids
    return out
