"""The live rule runner's loop: :class:`Runner` scans a job until it ends.

The process around it (arguments, the launcher's word, its own faults) is
:mod:`stepscope.rules.runner`, which re-exports these names.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from stepscope.jobfolder import FaultLog, JsonObject, folder_trouble, read_meta
from stepscope.process import ExitWatch, ProgressWriter, Word
from stepscope.read import Job
from stepscope.rules._evaluate import evaluate_rules
from stepscope.rules._live_buffer import LiveBuffer
from stepscope.rules._live_parts import (
    SCAN_COMPONENT,
    Notifications,
    Observer,
    Observers,
    asked_live,
    changed,
    request_stops,
    write_results,
)
from stepscope.rules._notify import Notifier
from stepscope.rules._registry import RuleSpec
from stepscope.rules._schedule import next_delay
from stepscope.rules._types import RuleResult

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.rules._buffer import LiveState
    from stepscope.rules._live import StreamReader

POLL_S = 0.5  # how often the runner looks for the job's end
COMPONENT = "rules-runner"
DEFAULT_S = 2.0  # the period of a rule set without rules (none to judge)
MIN_PERIOD_S = 0.1


class Runner:
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
        # What run() waits and measures with (tests drive it with a fake clock).
        self.sleep: Callable[[float], None] = time.sleep
        self.cpu: Callable[[], float] = time.process_time
        self.startup_cpu = 0.0  # the CPU of the runner's process before run() (main sets it)
        self._meta_due = 0.0  # job.json is read at most every store.min_interval_s
        self._last: dict[str, JsonObject] = {}  # verdicts as last written (object stores)
        self.word: Word | None = None  # the launcher's word that the job ended
        self.lost: str | None = None  # the job folder was deleted or made read-only
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
            self.faults.record(SCAN_COMPONENT, f"reading the last rows: {_line(exc)}")
        if last:
            self.observers.tell("seeing rows", lambda o: o.seen(last))

    def close(self) -> None:
        """Wait for the observers to send what they still hold (``END_WAIT_S`` in all)."""
        self.observers.close(self.mono)

    def job_over(self, parent: ExitWatch | None) -> bool:
        if self.word is not None:  # the launcher tells: job.json is not read
            heard = self.word.heard()
            if heard is not None:
                return heard
            self.word = None  # the launcher died without a word: job.json, heartbeats
        if self.mono() < self._meta_due:
            return False
        self._meta_due = self.mono() + self.job.store.min_interval_s
        try:
            if parent is None:  # a dead launcher is seen by its stale heartbeats
                return str(self.job.meta.get("status")) != "Running"
            # job.json as written: Job.meta would also read every heartbeat, twice a second.
            return str(read_meta(self.job.store).get("status")) != "Running"
        except Exception as exc:  # an unreadable job.json (store down): try again later
            self.faults.record(SCAN_COMPONENT, f"reading job.json: {_line(exc)}")
            return False

    def try_scan(self) -> None:
        """One scan; its error is recorded and the next scan reads the same rows again."""
        try:
            self.scan()
        except Exception as exc:
            self.lost = folder_trouble(self.job.store, exc)
            self.faults.record(SCAN_COMPONENT, _line(exc), traceback=traceback.format_exc())

    def live_from_start(self) -> bool:
        return asked_live(self.rules, self.specs, self.observers.reads_rows)

    def run(self, parent_pid: int | None) -> list[RuleResult]:
        """Scan until the job ends, then evaluate it completely.

        The runner process's start-up (``startup_cpu``: its imports and the job's
        opening, 0.3-0.5 s of CPU; then the live buffer's and its readers' making) is
        paid back like a costly scan before the first one, so its share stays within
        ``CPU_SHARE`` from the start: a short job gets its verdicts from the final
        evaluation alone, unless it asked for live ones (:meth:`live_from_start`)."""
        period, live = self.period(), self.live_from_start()
        next_scan = self.mono() + next_delay(period, 0.0 if live else self.startup_cpu)
        parent = ExitWatch({"launcher": parent_pid}) if parent_pid is not None else None
        while not self.job_over(parent):
            self.progress.beat()
            if parent is not None and parent.ended():  # the launcher died: the job may not
                parent.close()
                parent, self._meta_due = None, 0.0
                continue
            if self.mono() >= next_scan and not self.live.made:
                setup = self.live.make()  # the live buffer, its readers: start-up too
                if not live:  # paid back as the rest of it was, before the first scan
                    next_scan = self.mono() + next_delay(0.0, setup)
                    continue
            if self.mono() >= next_scan:
                began, cpu = self.mono(), self.cpu()
                self.try_scan()
                next_scan = began + next_delay(period, self.cpu() - cpu)
            self.sleep(max(0.0, min(POLL_S, next_scan - self.mono())))
        if parent is not None:
            parent.close()
        if self.word is not None:
            self.word.close()
        self.progress.beat()  # the final evaluation begins
        # a folder that took no verdict: the final one would be lost too (its reads cost
        # the CPU of a whole evaluation, and the launcher's return waits for it)
        if self.lost is None:
            results = self.final()
        else:
            results = []
            self.observers.tell("hearing the job's end", lambda o: o.ended(results))
        self.close()  # what the observers hold goes out before the runner exits
        return results


def _line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
