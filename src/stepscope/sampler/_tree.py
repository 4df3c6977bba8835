"""The job's processes: CPU, RSS and I/O of a process and all its descendants.

Members come and go (DataLoader workers live as long as an epoch). On Linux the tree
is listed at every sample (:mod:`._tasks`), so a worker is found at the first sample
after its start, and its CPU and I/O count from its start (procfs gives the start
time: one started after the previous sample is wholly new), not from the reading
that found it. A member that exits is reaped by its parent, whose counters of
waited-for children (``cutime``/``cstime``, and ``/proc/<pid>/io``, which includes
them) then grow by the child's totals: what the child did after the last reading is
counted there, less what was counted already. So a worker that lives less than a
sampling interval counts too. Elsewhere psutil lists the tree once per ``refresh_s``
and a process counts from the reading that finds it.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

import psutil

from stepscope.process import process
from stepscope.sampler._pressure import run_delay, thread_delays
from stepscope.sampler._roles import Roles
from stepscope.sampler._tasks import TreeScan, boot_clock, descendant_pids, scan_tree


@dataclass(frozen=True)
class _Counters:
    """One member's cumulative counters at a reading."""

    own: float  # CPU seconds of its own threads
    reaped: float  # CPU seconds of its waited-for (reaped) descendants
    io: tuple[float, float]  # bytes read, written (its reaped descendants' included)
    ppid: int

    def total(self) -> tuple[float, float, float]:
        return self.own + self.reaped, self.io[0], self.io[1]


def _counters(proc: psutil.Process, last: _Counters | None) -> tuple[_Counters, float] | None:
    """(counters, RSS bytes) of ``proc``; None once it has exited. I/O it cannot read
    (a zombie's, a platform without it) stays at ``last``: what a reaped child adds
    to its parent's is then not counted twice."""
    try:
        with proc.oneshot():
            t, rss, ppid = proc.cpu_times(), proc.memory_info().rss, proc.ppid()
    except psutil.Error:
        return None
    io = _io(proc) or (last.io if last is not None else (0.0, 0.0))
    return _Counters(t.user + t.system, t.children_user + t.children_system, io, ppid), rss


def _io(proc: psutil.Process) -> tuple[float, float] | None:
    try:
        io = proc.io_counters()  # storage bytes (read_bytes/write_bytes of /proc/<pid>/io)
    except (psutil.Error, AttributeError, NotImplementedError):
        return None  # exited, not ours to read, or a platform without it
    return float(io.read_bytes), float(io.write_bytes)


class ProcessTree:
    """CPU, RSS, I/O and thread states of a process and all its descendants."""

    def __init__(self, pid: int | None, refresh_s: float = 1.0) -> None:
        self.root = process(pid) if pid is not None else None
        self.refresh_s, self._listed = refresh_s, -math.inf
        self._members: list[psutil.Process] = []
        self._last: dict[psutil.Process, _Counters] = {}
        self._scanned_at: float | None = None  # boot clock of the previous listing
        self._scan: TreeScan | None = None
        self.roles = Roles()
        self.main_cpu: float | None = None  # of the main processes at the last read()
        self.run_wait: float | None = None  # their main threads' run-queue wait, %
        self.thread_run_wait: float | None = None  # their threads' (at most dt each), %
        self.io_wait: float | None = None  # % of the job's active threads in disk sleep
        self.io_bps: tuple[float | None, float | None] = (None, None)  # read, write
        self._delays: dict[psutil.Process, float] = {}  # run_delay at the last reading
        self._pool_delays: dict[psutil.Process, float] = {}  # the pool children's
        self.pool_run_wait: float | None = None  # their main threads' run-queue wait, %
        self._thread_delays: dict[psutil.Process, dict[int, float]] = {}  # by thread id

    def read(self, dt: float | None) -> tuple[float | None, float | None]:
        """(CPU % of one core summed over ``dt`` seconds, RSS bytes); (None, None) without root."""
        listed_at = self._scanned_at
        members = self._list()
        seen: dict[psutil.Process, _Counters] = {}
        job, main, rss = [0.0, 0.0, 0.0], 0.0, 0.0
        for proc in members:
            got = _counters(proc, self._last.get(proc))
            if got is None:
                continue  # it has exited
            seen[proc], size = got
            rss += size
            before = self._before(proc, got[0], listed_at)
            main += max(got[0].own - before.own, 0.0) if self.roles.is_main(proc) else 0.0
            for i, (now, then) in enumerate(zip(got[0].total(), before.total(), strict=True)):
                job[i] += max(now - then, 0.0)  # a counter that went back: no negative
        gone = [c for p, c in self._last.items() if p not in seen]
        job = self._less_reaped(job, gone, seen)
        self._last = seen
        self._rates(job, main, dt, seen)
        if not seen:
            return None, None
        return (100.0 * job[0] / dt if dt else None), rss

    def _before(self, proc: psutil.Process, now: _Counters, listed_at: float | None) -> _Counters:
        """The counters to count ``proc`` from: its last reading; zero for a process
        started since the previous listing (all it did is new); else the current ones."""
        if proc in self._last:
            return self._last[proc]
        started = self._scan.started.get(proc.pid) if self._scan else None
        if listed_at is not None and started is not None and started >= listed_at - 0.02:
            return _Counters(0.0, 0.0, (0.0, 0.0), now.ppid)
        return now  # found late (or the first reading): never a spike

    @staticmethod
    def _less_reaped(
        job: list[float], gone: list[_Counters], seen: dict[psutil.Process, _Counters]
    ) -> list[float]:
        """``job`` less what the gone members had counted already, where a member
        (their parent) reaped them and so counts their totals again."""
        parents = {p.pid for p in seen}
        for child in gone:
            if child.ppid in parents:
                job = [j - c for j, c in zip(job, child.total(), strict=True)]
        return [max(j, 0.0) for j in job]  # a counter that went back is no negative rate

    def _rates(
        self, job: list[float], main: float, dt: float | None, seen: dict[psutil.Process, _Counters]
    ) -> None:
        self.main_cpu = 100.0 * main / dt if dt and seen else None
        self.io_bps = (job[1] / dt, job[2] / dt) if dt and seen else (None, None)
        # per thread: one read of each main process's threads gives both columns
        threads = {p: thread_delays(p.pid) for p in seen if self.roles.is_main(p)}
        self.run_wait, self._delays = _waited(threads, self._delays, dt)
        self.thread_run_wait = self._thread_run_wait(threads, dt)
        # the pool children's (data-loader workers') main threads: one file each
        pool: dict[psutil.Process, dict[int, float]] = {
            p: {} for p in seen if not self.roles.is_main(p)
        }
        self.pool_run_wait, self._pool_delays = _waited(pool, self._pool_delays, dt)
        scan = self._scan
        active = scan.running + scan.disk if scan else 0
        self.io_wait = (100.0 * scan.disk / active if active else 0.0) if scan and seen else None

    def _thread_run_wait(
        self, threads: dict[psutil.Process, dict[int, float]], dt: float | None
    ) -> float | None:
        """% of ``dt`` the threads of each main process (its training loop, torch's
        threads, any other) waited runnable for a core, summed over its threads and at
        most ``dt`` a process, then summed over the main processes.

        Summed, not the most-waiting thread's: torch's threads meet at a barrier,
        and while one of them waits for a core the others spin there, which shows as
        the process's own CPU (two threads beside a busy process per core: steps 70x
        slower, half of it "own CPU"); so the team is held up whenever any of its
        threads waits. At most ``dt``: their waits may overlap. A thread that sleeps
        (``time.sleep``, a lock, I/O) waits for no core, so it adds nothing. A thread
        started since the last reading counts all its wait (all of it is new); a
        process counts from its second reading."""
        now = {p: d for p, d in threads.items() if d}
        known, waited = False, 0.0
        for proc, delays in now.items():
            before = self._thread_delays.get(proc)
            if before is None:
                continue
            known = True
            each = [max(d - before.get(tid, 0.0), 0.0) for tid, d in delays.items()]
            # at most dt, or the most-waiting thread's (a read's jitter can pass dt)
            waited += min(sum(each), max(dt or 0.0, *each)) if each else 0.0
        self._thread_delays = now
        return 100.0 * waited / dt if dt and known else None

    def _list(self) -> list[psutil.Process]:
        """The members now: procfs' listing at every call, psutil's every ``refresh_s``."""
        if self.root is None:
            return []
        at = boot_clock()
        self._scan = scan = scan_tree(self.root.pid)
        if scan is not None and scan.complete:
            self._scanned_at = at
            known = {p.pid: p for p in self._members}
            found = [known.get(pid) or process(pid) for pid in scan.pids]
            self._set_members([p for p in found if p is not None])
        elif time.monotonic() - self._listed >= self.refresh_s:
            self._listed = time.monotonic()
            with contextlib.suppress(psutil.Error):
                self._set_members([self.root, *self._descendants(self.root)])
        return self._members

    def _set_members(self, members: list[psutil.Process]) -> None:
        if members != self._members:  # judge new members' roles (reads their command lines)
            self.roles.update(self.root, members)
        self._members = members

    def _descendants(self, root: psutil.Process) -> list[psutil.Process]:
        pids = descendant_pids(root.pid)
        if pids is None:
            return list(root.children(recursive=True))
        known = {p.pid: p for p in self._members}
        found = [known.get(pid) or process(pid) for pid in pids]
        return [p for p in found if p is not None]


def _waited(
    threads: dict[psutil.Process, dict[int, float]],
    before: dict[psutil.Process, float],
    dt: float | None,
) -> tuple[float | None, dict[psutil.Process, float]]:
    """% of ``dt`` the processes' main threads waited runnable for a core, summed (the
    training loop, or a worker, delayed by other work on its cores; None where no
    process was read before), and the run delays now, for the next reading."""
    delays = {
        p: d
        for p, mine in threads.items()
        if (d := mine[p.pid] if p.pid in mine else run_delay(p.pid)) is not None
    }
    waited = sum(max(d - before[p], 0.0) for p, d in delays.items() if p in before)
    known = any(p in before for p in delays)
    return (100.0 * waited / dt if dt and known else None), delays
