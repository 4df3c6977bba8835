"""How a job ended: its status, its first failed rank, and what would make it lie.

``node_status`` and ``rank_error`` say how the command ended. Two things would make
that record lie without a word: a step of the wall clock (``clock_step``: the job's
times keep the monotonic clock of ``JobClock``, the step is recorded), and ranks
that ended without their agent's end (``os._exit``, a signal, a native crash).

The agent records a rank's end from ``atexit``, ``sys.excepthook`` and its SIGTERM
handler (agent/_rank_exit.py). ``os._exit``, SIGKILL and a crash in native code
(SIGSEGV) pass none of them: the rank's record still says ``Running`` and what
its writer held since its last flush (every ``flush_s``, 2 s by default) is lost.
Nothing in the dying process can help it; the launcher, which outlives it, sees
the record and says so: the rank's record becomes ``Abrupt``, one fault record
(``faults/abrupt-exit-<node>-<launcher pid>.json``) says how much may be lost,
and job.json is marked ``incomplete`` (docs/format.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from stepscope.jobfolder import FaultLog, JobClock, JsonObject, paths, read_all
from stepscope.launch._helpers import describe_exit
from stepscope.store import Store

COMPONENT = "abrupt-exit"
DEFAULT_FLUSH_S = 2.0  # the agent's flush interval when its record does not say it
NEWEST_SEGMENTS = 2  # of a rank's steps, read for its last recorded step


def node_status(
    code: int, stop_reason: str | None, what: str = "the command", error: str | None = None
) -> tuple[str, str | None]:
    """Status and reason of a job (or a torchrun node) whose ``what`` exited with ``code``
    (``error``: the exception line of the rank that failed, if one was recorded)."""
    if stop_reason is not None:
        return "Stopped", stop_reason
    if code == 0:
        return "Completed", None
    return "Failed", f"{what} exited with code {code}" + (f": {error}" if error else "")


def rank_error(store: Store) -> str | None:
    """The exception line (``ValueError: bad shape``) of the first rank that failed,
    from ``ranks/rank-<r>.json``; None if no rank recorded one."""
    failed = [r for r in read_all(store, paths.RANKS) if r.get("status") == "Failed"]
    failed = [r for r in failed if isinstance(r.get("error"), str)]
    failed.sort(key=lambda r: float(t) if isinstance(t := r.get("time"), int | float) else 0.0)
    return str(failed[0]["error"]) if failed else None


def clock_step(clock: JobClock, faults: FaultLog) -> str | None:
    """Record a step of the wall clock (an NTP correction) and say it in one line (None:
    none). The job's times keep the clock of its start, so it shifts nothing; a reader
    comparing them with its own wall clock (a heartbeat's age) should know."""
    if (step := clock.step()) is None:
        return None
    error = (
        f"the wall clock stepped {step:+.1f} s during the job; the job's times and "
        "durations keep a monotonic clock from its start, unchanged"
    )
    faults.record("clock-step", error, step_seconds=round(step, 3))
    return error


@dataclass(frozen=True)
class Abrupt:
    """One rank that ended without its agent's end."""

    rank: int
    pid: int | None
    how: str  # "exited with code 0", "killed by SIGKILL"
    lost_s: float  # at most this many seconds of its steps were not flushed

    def line(self) -> str:
        return (
            f"rank {self.rank} {self.how} without its agent's end (os._exit, a signal or a "
            f"native crash): ended without flushing; up to {self.lost_s:.1f} s of steps lost"
        )


def _dead(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def last_step_end(store: Store, rank: int) -> float | None:
    """The end of the rank's newest recorded step (its newest segments), or None."""
    from stepscope.store import read_segment  # pyarrow: only for a rank that ended abruptly

    keys = store.list(paths.steps_stream(rank), suffix=".parquet")
    ends: list[float] = []
    for key in keys[-NEWEST_SEGMENTS:]:
        try:
            # from Arrow's memory, not a Python file: the launcher exits right after
            table = read_segment(store.read_bytes(key), columns=["end"])
        except Exception:  # a damaged or vanished segment: the others may tell
            continue
        ends += [float(e) for e in table.column("end").to_pylist() if e is not None]
    return max(ends, default=None)


def _lost(store: Store, rank: int, flush_s: float, end: float) -> float:
    """Seconds of steps at most lost: the flush interval, or less when the newest
    recorded step ended closer to the end (nothing before it was lost)."""
    try:
        last = last_step_end(store, rank)
    except Exception:
        last = None
    return max(0.0, min(flush_s, end - last)) if last is not None else flush_s


def record_abrupt(
    store: Store, node: str, end: float, faults: FaultLog, child: tuple[int, int] | None = None
) -> list[Abrupt]:
    """Find this node's ranks whose record says ``Running`` after the command ended
    (their process gone), record each as ``Abrupt`` and in ``faults/``.

    ``child`` (pid, ``Popen.returncode``) is the command the launcher started: a rank
    that is that process is said to have ended as its exit status says. Under torchrun
    the ranks are torchrun's children, reaped by it: their record is all there is
    (docs/distributed.md, "How a rank ended")."""
    found: list[Abrupt] = []
    try:
        records = read_all(store, paths.RANKS)
    except Exception:  # a store that fails: the end of the job is recorded all the same
        return found
    for rec in records:
        pid, rank = rec.get("pid"), rec.get("rank")
        if rec.get("status") != "Running" or rec.get("node") != node or not _dead(pid):
            continue
        if not isinstance(rank, int):
            continue
        code, sig = None, None
        if child is not None and pid == child[0]:  # the command itself: its status says how
            how, code, sig = describe_exit(child[1])
        else:
            how = "ended"
        flush = rec.get("flush_s")
        flush_s = float(flush) if isinstance(flush, int | float) else DEFAULT_FLUSH_S
        lost = round(_lost(store, rank, flush_s, end), 1)
        one = Abrupt(rank, pid if isinstance(pid, int) else None, how, lost)
        body: JsonObject = {**rec, "status": "Abrupt", "time": end, "exit_code": code}
        body |= {"signal": sig, "error": one.line(), "lost_seconds": lost}
        body["recorded_by"] = "launcher"
        try:
            store.write_json(paths.rank_key(rank), body)
        except Exception as exc:  # the fault below still says it
            faults.record("rank-record", f"{type(exc).__name__}: {exc}")
        faults.record(COMPONENT, one.line(), rank=rank, rank_pid=one.pid, exit_code=code,
                      signal=sig, lost_seconds=lost)  # fmt: skip
        found.append(one)
    return found


def incomplete_reason(found: list[tuple[object, str]]) -> str | None:
    """job.json's ``incomplete_reason`` from the ranks that ended abruptly, as (rank,
    :meth:`Abrupt.line`), first first: the first one's line, after which ranks when
    several did (``2 ranks (0, 1) ended without flushing; rank 0 ...``); None: none."""
    if not found:
        return None
    if len(found) == 1:
        return found[0][1]
    ranks = ", ".join(str(rank) for rank, _ in found)
    return f"{len(found)} ranks ({ranks}) ended without flushing; {found[0][1]}"


def incomplete_of_ranks(ranks: list[JsonObject]) -> str | None:
    """``incomplete_reason`` from every rank's record (``ranks/rank-<r>.json``): the
    job's data is incomplete when any rank, on any node, was recorded ``Abrupt``."""
    abrupt = [r for r in ranks if r.get("status") == "Abrupt"]
    abrupt.sort(key=lambda r: float(t) if isinstance(t := r.get("time"), int | float) else 0.0)
    lines = [(r.get("rank"), r.get("error") or f"rank {r.get('rank')} ended") for r in abrupt]
    return incomplete_reason([(rank, str(line)) for rank, line in lines])
