"""The busiest processes outside the job: rows of ``others/<node>/`` (docs/format.md).

Every ``every_s`` seconds (3 s, or the sampling interval if longer) the sampler reads
the CPU time of every process of the host and stores the top ``top`` (5) outside the
job (the watched process and all its descendants) that used at least ``min_cpu`` (5 %
of one core) since the last scan. Reading every process costs: on Linux one small
procfs file each (~1.3 ms for 90 processes, BENCHMARKS.md), hence the spacing, which
``system/`` rows at every sample do not need. Elsewhere psutil reads them (slower).
Each scan also splits all the others' CPU by the job's autogroup (``_autogroup``):
``others_cpu_group`` and ``others_groups`` of the ``system/`` row of that sample.
A process counts from the first scan that finds it (its count starts there): one
that lives less than a scan interval is not named, as in ``proc_cpu``'s tree.

stepscope's own processes are never others: the sampler itself and, where its parent
is a stepscope launcher (``stepscope run``), the launcher and its other children (the
live rule runner) outside the job. Their CPU is the ``own_cpu`` column of
``system/<node>/``, read at every sample from the pids the last scan found.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass

import psutil
import pyarrow as pa

from stepscope.jobfolder import paths
from stepscope.sampler._autogroup import GroupSplit, split_by_group
from stepscope.sampler._encoding import others_batch
from stepscope.sampler._nvml import Row
from stepscope.store import SegmentWriter, Store

EVERY_S = 3.0
TOP = 5
MIN_CPU = 5.0  # % of one core: below it a process is not worth naming
COMMAND_CHARS = 120
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class _Proc:
    """One process at a scan: ``key`` (pid, start) survives pid reuse."""

    pid: int
    ppid: int
    name: str
    cpu_s: float
    key: tuple[int, float]


class OtherProcesses:
    """Scans the host's processes; :meth:`scan` returns the rows of the busiest others."""

    def __init__(
        self,
        root: int | None,
        every_s: float = EVERY_S,
        top: int = TOP,
        launcher: int | None = None,
    ) -> None:
        self.root, self.every_s, self.top = root, every_s, top
        self.min_cpu = MIN_CPU
        # stepscope's own: the launcher's tree where the launcher is stepscope's
        self.launcher = launcher if launcher is not None and _is_stepscope(launcher) else None
        self.own: set[int] = {os.getpid()} | ({self.launcher} if self.launcher else set())
        self._own_cpu: tuple[float, dict[int, float]] | None = None  # mono, CPU s by pid
        self._last: dict[tuple[int, float], float] = {}  # CPU seconds at the last scan
        self._scanned: float | None = None  # monotonic time of the last scan
        self.split: GroupSplit | None = None  # the last scan's, by the job's autogroup

    def due(self, mono: float) -> bool:
        return self._scanned is None or mono - self._scanned >= self.every_s

    def scan(self, mono: float) -> list[Row]:
        """Rows (``pid``, ``name``, ``command``, ``cpu``) since the last scan, busiest
        first; none at the first scan, which only starts the counts."""
        procs = _read_procs()
        dt = mono - self._scanned if self._scanned is not None else 0.0
        before, self._last = self._last, {p.key: p.cpu_s for p in procs}
        self._scanned = mono
        if dt <= 0:
            return []
        mine = _tree(self.root, procs) if self.root is not None else set()
        own = _tree(self.launcher, procs) - mine if self.launcher is not None else set()
        self.own = own | {os.getpid()}
        used = [
            (100.0 * (p.cpu_s - before[p.key]) / dt, p)
            for p in procs
            if p.pid not in mine and p.pid not in self.own and p.key in before
        ]
        self.split = split_by_group(self.root, ((c, p.pid) for c, p in used), self.min_cpu)
        busiest = sorted((u for u in used if u[0] >= self.min_cpu), key=lambda u: -u[0])
        return [
            {"pid": p.pid, "name": p.name, "command": _command(p.pid), "cpu": cpu}
            for cpu, p in busiest[: self.top]
        ]

    def own_cpu(self, mono: float) -> float | None:
        """CPU of stepscope's own processes (:attr:`own`) since the last call, % of one
        core summed; None the first time (the counts start)."""
        now = {pid: cpu for pid in self.own if (cpu := _cpu_seconds(pid)) is not None}
        last, self._own_cpu = self._own_cpu, (mono, now)
        if last is None or mono <= last[0]:
            return None
        used = sum(max(cpu - last[1].get(pid, cpu), 0.0) for pid, cpu in now.items())
        return 100.0 * used / (mono - last[0])


class OthersStream:
    """The sampler's ``others/<node>/`` stream: scans when due (the sampling thread),
    stores at each flush (the flush thread: only it touches the writer, whose own
    bound holds the rows while the store fails)."""

    def __init__(
        self, store: Store, node: str, root: int | None, launcher: int | None = None
    ) -> None:
        self.node, self.scanner = node, OtherProcesses(root, launcher=launcher)
        self._writer = SegmentWriter(store, paths.others_stream(node))
        self._scanned: deque[pa.RecordBatch] = deque()  # thread-safe append and popleft

    def sample(self, mono: float, time: float, interval_s: float) -> Row:
        """Scan if one is due (every ``EVERY_S`` s, or ``interval_s`` if longer); the
        system columns of the split by the job's autogroup (null without a scan)."""
        self.scanner.every_s = max(EVERY_S, interval_s)
        self.scanner.split = None
        if self.scanner.due(mono):
            rows = self.scanner.scan(mono)
            head: Row = {"time": time, "node": self.node}
            if rows:
                self._scanned.append(others_batch([head | r for r in rows]))
        split = self.scanner.split
        if split is None:
            return {"others_cpu_group": None, "others_groups": None}
        return {"others_cpu_group": split.same_cpu, "others_groups": split.groups}

    def flush(self, final: bool = False) -> None:
        while self._scanned:
            self._writer.append(self._scanned.popleft())
        self._writer.flush(final)


def _tree(root: int, procs: list[_Proc]) -> set[int]:
    """``root`` and all its descendants, from the parent pids of one scan."""
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo += [c for c in children.get(pid, ()) if c not in out]
    return out


def _is_stepscope(pid: int) -> bool:
    """Whether ``pid`` runs stepscope (its command line names it): a launcher."""
    try:
        return any("stepscope" in arg for arg in psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` (None once it has exited)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return _parse_stat(pid, f.read()).cpu_s
    except (OSError, ValueError, IndexError):
        pass
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return float(t.user + t.system)


def _read_procs() -> list[_Proc]:
    if not os.path.isdir("/proc/self/task"):
        return _psutil_procs()
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    out.append(_parse_stat(int(entry), f.read()))
            except (OSError, ValueError, IndexError):
                continue  # it has exited
    return out


def _parse_stat(pid: int, stat: bytes) -> _Proc:
    """A /proc/<pid>/stat line: ``pid (comm) state ppid ...`` (proc(5)); the name may
    hold spaces and parentheses, so the fields start after its last ``)``."""
    close = stat.rindex(b")")
    name = stat[stat.index(b"(") + 1 : close].decode(errors="replace")
    fields = stat[close + 2 :].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime
    return _Proc(pid, int(fields[1]), name, cpu_s, (pid, float(fields[19])))


def _psutil_procs() -> list[_Proc]:
    out = []
    for p in psutil.process_iter(["ppid", "name", "cpu_times", "create_time"]):
        info = p.info
        times = info["cpu_times"]
        if times is None:
            continue  # access denied
        cpu_s = times.user + times.system
        out.append(
            _Proc(
                p.pid,
                info["ppid"] or 0,
                info["name"] or "",
                cpu_s,
                (p.pid, info["create_time"] or 0.0),
            )
        )
    return out


def _command(pid: int) -> str:
    """The command line of ``pid``, cut to ``COMMAND_CHARS`` ('' if it cannot be read)."""
    try:
        args = psutil.Process(pid).cmdline()
    except psutil.Error:
        return ""
    return " ".join(args)[:COMMAND_CHARS]
