"""The live rule runner's loop: :class:`Runner` scans a job until it ends.

What one scan does is :mod:`._live_scans`. The process around the loop (arguments,
the launcher's word, its own faults) is :mod:`stepscope.rules.runner`, which
re-exports these names.
"""

from __future__ import annotations

import traceback

from stepscope.jobfolder import folder_trouble, read_meta
from stepscope.process import ExitWatch, Word
from stepscope.rules._live_parts import SCAN_COMPONENT, asked_live
from stepscope.rules._live_scans import LiveScans, one_line
from stepscope.rules._schedule import next_delay
from stepscope.rules._types import RuleResult

POLL_S = 0.5  # how often the runner looks for the job's end
COMPONENT = "rules-runner"


class Runner(LiveScans):
    """Scans one job until it ends, then evaluates it completely."""

    # Immutable class defaults: an assignment makes each the instance's own.
    startup_cpu = 0.0  # the CPU of the runner's process before run() (main sets it)
    _meta_due = 0.0  # job.json is read at most every store.min_interval_s
    word: Word | None = None  # the launcher's word that the job ended
    lost: str | None = None  # the job folder was deleted or made read-only

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
            self.faults.record(SCAN_COMPONENT, f"reading job.json: {one_line(exc)}")
            return False

    def try_scan(self) -> None:
        """One scan; its error is recorded and the next scan reads the same rows again."""
        try:
            self.scan()
        except Exception as exc:
            self.lost = folder_trouble(self.job.store, exc)
            self.faults.record(SCAN_COMPONENT, one_line(exc), traceback=traceback.format_exc())

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
