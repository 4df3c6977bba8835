"""The live rule runner's scans: :class:`LiveScans` reads what is new in a job, judges
it, writes the running verdicts, tells its observers and acts; at the end, the final
evaluation. The loop around the scans, until the job ends, is :mod:`._live_runner`.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from stepscope.jobfolder import FaultLog, JsonObject
from stepscope.process import ProgressWriter
from stepscope.read import Job
from stepscope.rules._evaluate import evaluate_rules
from stepscope.rules._live_buffer import LiveBuffer
from stepscope.rules._live_parts import (
    SCAN_COMPONENT,
    Notifications,
    Observer,
    Observers,
    changed,
    request_stops,
    write_results,
)
from stepscope.rules._notify import Notifier
from stepscope.rules._registry import RuleSpec
from stepscope.rules._types import RuleResult

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.rules._buffer import LiveState
    from stepscope.rules._live import StreamReader

DEFAULT_S = 2.0  # the period of a rule set without rules (none to judge)
MIN_PERIOD_S = 0.1


class LiveScans:
    """Scans one job: live verdicts, actions, and the final evaluation."""

    def __init__(
        self,
        job: Job,
        specs: list[RuleSpec],
        clock: Callable[[], float] = time.time,
        mono: Callable[[], float] | None = None,
    ) -> None:
        # ``clock``: the job's "now" the rules judge with; ``mono``: what the scans are
        # scheduled by, never the wall clock (its steps would stall or rush them)
        self.job, self.specs, self.clock = job, specs, clock
        self.mono = mono or (time.monotonic if clock is time.time else clock)
        self.rules = [s.rule for s in specs]
        # made by the first scan: one ending before it is judged by the final evaluation
        self.live = LiveBuffer(job, self.rules, clock, lambda: self.cpu())
        self.stopped: set[str] = set()
        self.scans = self.quiet_scans = 0  # quiet: the scans that read no new row
        self._results: list[RuleResult] | None = None  # the last scan's verdicts
        self._unjudged = False  # rows added to the buffer since its last evaluation
        # What the loop (Runner.run) waits and measures with (tests drive it with a fake clock).
        self.sleep: Callable[[float], None] = time.sleep
        self.cpu: Callable[[], float] = time.process_time
        self._last: dict[str, JsonObject] = {}  # verdicts as last written (object stores)
        # its records' times: its clock (the job's timeline, as its verdicts')
        where, pid = socket.gethostname(), os.getpid()
        self.faults = FaultLog(job.store, where, pid, {"rank": None}, wall=clock)
        # the launcher's watch on this loop (hung?): a beat per turn and per stage of a scan
        self.progress = ProgressWriter(None)
        # told what the scans read and judge: /metrics, trackers (observe()), notifications
        self.notifier = Notifier(job.name, job.path, self.faults)
        self.observers = Observers(self.faults, Notifications(self.notifier, specs))

    def observe(self, observer: Observer) -> None:
        """Tell ``observer`` what the scans read and judge, and the final verdicts."""
        self.observers.add(observer)

    @property
    def state(self) -> LiveState:
        """The live buffer the scans judge (made on first use)."""
        return self.live.state

    @property
    def readers(self) -> dict[str, StreamReader]:
        """A reader of new rows per kind of stream (made on first use)."""
        return self.live.readers

    def period(self) -> float:
        """Seconds between scans: the shortest ``scan_interval_us``, at least the
        store's ``min_interval_s`` (object stores bill each listing)."""
        given = min((r.p_int("scan_interval_us") / 1e6 for r in self.rules), default=DEFAULT_S)
        return max(given, self.job.store.min_interval_s, MIN_PERIOD_S)

    def scan(self) -> list[RuleResult]:
        """Read what is new, judge the buffer, write the running verdicts, act.

        A scan that read no new row judges only the rules whose verdict can change
        without one (``Rule.judges_now``) and keeps the others' last verdicts (their
        input is the same), unless a chunk is due to leave the buffer: a scan of idle
        streams costs their listings, not the rules.
        """
        seen: dict[str, pd.DataFrame] = {}
        for kind, reader in self.readers.items():
            frame = reader.read_new()
            # rows added and not yet judged (also when a later read or the rules fail)
            self._unjudged = self._unjudged or frame is not None
            self.state.add(kind, frame)
            if frame is not None:
                seen[kind] = frame
            self.progress.beat()
        if seen:
            self.observers.tell("seeing rows", lambda o: o.seen(seen))
        now = self.clock()
        if self._unjudged or self._results is None or self.state.trim_due(now):
            results = written = self.state.evaluate(now)
            self._unjudged = False
        else:
            results, written = self._rejudge(self._results, now)
        self._results = results
        store = self.job.store
        write_results(store, changed(self._last, written) if store.is_remote else written)
        # after the write: a notification's receiver finds the verdict in the folder
        self.observers.tell("hearing verdicts", lambda o: o.judged(results))
        request_stops(store, self.specs, results, self.stopped)
        self.scans += 1
        return results

    def _rejudge(
        self, last: list[RuleResult], now: float
    ) -> tuple[list[RuleResult], list[RuleResult]]:
        """``last`` with the ``judges_now`` rules judged again; and those alone."""
        again = [r for r in self.rules if r.judges_now]
        self.quiet_scans += 1
        if not again:
            return last, []
        judged = self.state.evaluate(now, again)
        fresh = dict(zip([id(r) for r in again], judged, strict=True))
        results = [fresh.get(id(rule), res) for rule, res in zip(self.rules, last, strict=True)]
        return results, list(fresh.values())

    def final(self) -> list[RuleResult]:
        """The complete evaluation of the whole job: the final statuses, told to the
        observers (``ended``: they start sending; :meth:`close` waits for them)."""
        if self.observers.reads_rows:  # e.g. the endpoint's last scrapes
            self._read_last()
        results = evaluate_rules(self.job, self.rules, self.clock())
        write_results(self.job.store, results)
        self.observers.tell("hearing the final verdicts", lambda o: o.ended(results))
        return results

    def _read_last(self) -> None:
        """The steps and samples written since the last scan, to the observers."""
        last: dict[str, pd.DataFrame] = {}
        try:
            for kind in ("steps", "system"):
                if (frame := self.readers[kind].read_new()) is not None:
                    last[kind] = frame
        except Exception as exc:  # the observers go without; the final evaluation reads all
            self.faults.record(SCAN_COMPONENT, f"reading the last rows: {one_line(exc)}")
        if last:
            self.observers.tell("seeing rows", lambda o: o.seen(last))

    def close(self) -> None:
        """Wait for the observers to send what they still hold (``END_WAIT_S`` in all)."""
        self.observers.close(self.mono)


def one_line(exc: BaseException) -> str:
    """An error in one line of at most 500 characters, for a fault record."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
