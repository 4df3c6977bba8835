"""Which of the job's processes run the training loop, and which are its helpers.

``proc_cpu_main`` (docs/format.md) is the CPU of the job's *main* processes: the
watched command and every process it started with a program of its own (torchrun's
ranks, a script run by a shell). A *pool child* is not main: a process forked from
a member without an ``exec`` (it keeps its parent's command line: a DataLoader
worker, a ``multiprocessing.Pool`` worker on Linux' default start method) or started
by ``multiprocessing``'s spawn or forkserver methods (their command line runs
``multiprocessing``). ``proc_cpu - proc_cpu_main`` is then what the data-loader
workers and other pools used. A process is judged once, when first listed: one
listed between its ``fork`` and its ``exec`` (a few ms) stays a pool child.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import psutil

_MP_MARKERS = ("--multiprocessing-fork", "from multiprocessing")


def is_pool_child(cmdline: Sequence[str], parent_cmdline: Sequence[str] | None) -> bool:
    """True for a forked copy of a member (same command line) or a multiprocessing child."""
    if parent_cmdline is None:  # the watched process, or a parent outside the job
        return False
    if list(cmdline) == list(parent_cmdline):
        return True
    return any(marker in arg for arg in cmdline for marker in _MP_MARKERS)


def _facts(proc: psutil.Process) -> tuple[list[str], int] | None:
    try:
        with proc.oneshot():
            return proc.cmdline(), proc.ppid()
    except psutil.Error:
        return None  # it has exited, or is not ours to read


class Roles:
    """Main or pool child, for each member of a process tree (judged once per process)."""

    def __init__(self) -> None:
        self._main: dict[psutil.Process, bool] = {}
        self._cmdlines: dict[int, list[str]] = {}

    def update(self, root: psutil.Process | None, members: Iterable[psutil.Process]) -> None:
        """Judge the members not seen before; forget those that left the tree."""
        members = list(members)
        new = [p for p in members if p not in self._main]
        parents: dict[psutil.Process, int] = {}
        for proc in new:  # every new command line first: a parent may be listed late
            facts = _facts(proc)
            if facts is not None:
                self._cmdlines[proc.pid], parents[proc] = facts
        self._refresh_parents(members, set(parents.values()))
        judged = {p: self._main[p] for p in members if p in self._main}
        for proc in new:
            if proc not in parents:
                judged[proc] = True  # unreadable: counted as main, as before this split
                continue
            parent = None if proc == root else self._cmdlines.get(parents[proc])
            judged[proc] = not is_pool_child(self._cmdlines[proc.pid], parent)
        self._main = judged
        alive = {p.pid for p in members}
        self._cmdlines = {pid: c for pid, c in self._cmdlines.items() if pid in alive}

    def _refresh_parents(self, members: list[psutil.Process], pids: set[int]) -> None:
        """Read again the command lines of the new members' parents: one first read
        between its ``fork`` and its ``exec`` (the watched command, read right after its
        start) holds its launcher's, and its forked workers would not match it."""
        for proc in members:
            if proc.pid in pids and (facts := _facts(proc)) is not None:
                self._cmdlines[proc.pid] = facts[0]

    def is_main(self, proc: psutil.Process) -> bool:
        """Whether ``proc`` is a main process (unknown members count as main)."""
        return self._main.get(proc, True)
