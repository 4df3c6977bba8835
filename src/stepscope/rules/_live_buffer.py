"""The live rule runner's buffer and its readers of new rows (:mod:`._live_runner`),
made on first use: they open DuckDB connections and read the job's start (0.1-0.3 s of
CPU), so a job that ends before its first live scan is judged by the final evaluation
alone and never pays for them (BENCHMARKS.md, "What a run costs")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from stepscope.rules._evaluate import job_input
from stepscope.rules._live_parts import chunk_seconds

if TYPE_CHECKING:
    from stepscope.read import Job
    from stepscope.rules._base import Rule
    from stepscope.rules._buffer import LiveState
    from stepscope.rules._live import StreamReader


class LiveBuffer:
    """The buffer the scans judge and a reader per kind of stream, made by :meth:`make`
    or at their first use. ``clock``: the job's "now"; ``cpu``: the process's CPU
    seconds (read when called: a test's fake clock replaces it)."""

    def __init__(
        self,
        job: Job,
        rules: Sequence[Rule],
        clock: Callable[[], float],
        cpu: Callable[[], float],
    ) -> None:
        self.job, self.rules, self.clock, self.cpu = job, list(rules), clock, cpu
        self._state: LiveState | None = None
        self._readers: dict[str, StreamReader] | None = None

    @property
    def made(self) -> bool:
        return self._state is not None

    def make(self) -> float:
        """Make the buffer and its readers; the CPU seconds it took."""
        from stepscope.rules._buffer import LiveState
        from stepscope.rules._live import readers

        cpu = self.cpu()
        base = job_input(self.job, self.clock())
        self._state = LiveState(self.rules, base, chunk_seconds(self.rules, base.interval_s()))
        self._readers = readers(self.job.store, self.rules)
        return self.cpu() - cpu

    @property
    def state(self) -> LiveState:
        """The live buffer the scans judge."""
        if self._state is None:
            self.make()
        assert self._state is not None
        return self._state

    @property
    def readers(self) -> dict[str, StreamReader]:
        """A reader of new rows per kind of stream."""
        if self._readers is None:
            self.make()
        assert self._readers is not None
        return self._readers
