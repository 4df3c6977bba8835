"""``stepscope report JOB [-o FILE]``: the report, with a progress bar.

The bar goes to stderr, only when stderr is a terminal and only once the
report has taken longer than :data:`BAR_AFTER_S` (a small job's report is
written before the bar would have shown). Piped or redirected output gets
no bar, so logs and scripts only see the path printed on stdout.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from stepscope.read import open as open_job
from stepscope.report import write_report

BAR_AFTER_S = 0.5
BAR_WIDTH = 30


class ProgressBar:
    """A one-line ``\\r`` bar with the current stage, shown after a delay."""

    def __init__(
        self,
        stream: TextIO,
        enabled: bool,
        delay: float = BAR_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream, self.enabled, self.delay, self.clock = stream, enabled, delay, clock
        self.started = clock()
        self.shown = False

    def __call__(self, stage: str, fraction: float) -> None:
        if not self.enabled or self.clock() - self.started < self.delay:
            return
        done = int(BAR_WIDTH * min(max(fraction, 0.0), 1.0))
        bar = "#" * done + "-" * (BAR_WIDTH - done)
        self.stream.write(f"\rreport [{bar}] {100 * fraction:3.0f}% {stage[:30]:<30}")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        """Erase the bar so that the next line starts clean."""
        if self.shown:
            self.stream.write("\r" + " " * (BAR_WIDTH + 50) + "\r")
            self.stream.flush()


def write_with_progress(
    job_path: str,
    output: str | None,
    stderr: TextIO | None = None,
    against: list[str] | None = None,
) -> str:
    """Write the report of the job at ``job_path`` (compared with the baseline's runs
    at ``against``, where given) and return its path; a bar on ``stderr`` while it
    takes long. A job that cannot be read raises its ``StepscopeError`` (no job
    there, unreadable store)."""
    err = stderr or sys.stderr
    job = open_job(job_path)
    base = None if against is None else [open_job(p) for p in against]
    bar = ProgressBar(err, enabled=err.isatty())
    try:
        return write_report(job, output, progress=bar, against=base)
    finally:
        bar.close()
