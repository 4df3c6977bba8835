"""Trackers while the job trains: ``python -m stepscope.export.live --tracker mlflow ...``.

``stepscope run --mlflow`` / ``--wandb`` (or ``$MLFLOW_RUN_ID`` / ``$WANDB_RUN_ID``
set for it) starts the live rule runner through this module: the runner
(:mod:`stepscope.rules.runner`, every other argument is its own) hands each scan's
new rows and its final verdicts to a :class:`LiveLogger`, which logs them from a
thread of its own. The training never waits for a tracker, and the runner's loop
neither: a scan's rows are queued (dropped, and counted, if the tracker lags
``QUEUE`` scans behind). A tracker that fails (a server that does not answer, a bad
run id, a missing extra) is recorded as ``faults/export-<tracker>-<node>-<pid>.json``
and left alone for the rest of the job.

Points: the steps finished since the last point, at most one point every
``EVERY_S`` seconds (so about 360 an hour, whatever the step rate), as the export
computes them (:mod:`stepscope.export._points`). Between points the logger holds the
system samples a point's GPU figure needs: the newest ``SYSTEM_ROWS`` at most, so a
job that never reports a step holds a bounded amount.

MLflow: into the training's run ``$MLFLOW_RUN_ID``, never ending it; W&B: a run of
stepscope's own beside the training's (:func:`~stepscope.export.to_wandb.open_wandb_beside`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import socket
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from stepscope.jobfolder import FaultLog

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.export.trackers import Tracker
    from stepscope.read import Job
    from stepscope.rules import RuleResult

TRACKERS = ("mlflow", "wandb")
EVERY_S = 10.0
QUEUE = 64
# System samples held between points: 1 sample/s of 8 nodes for 40 minutes (a first
# step that long still gets its GPU figure), about 10 MB of a GPU node's columns.
SYSTEM_ROWS = 20_000
# for the last points, the verdicts and the runs' close: within the launcher's
# TRACKERS_STOP_S (15 s) for its helpers, after the final evaluation
END_WAIT_S = 10.0


def open_tracker(kind: str, job: Job) -> Tracker:
    """The live tracker ``kind``: MLflow's the training's run, W&B's one of its own."""
    if kind == "mlflow":
        from stepscope.export.to_mlflow import open_mlflow

        # $MLFLOW_RUN_ID's run (never ended), else a new one (to_mlflow.py says why)
        return open_mlflow(None, None, os.environ.get("MLFLOW_EXPERIMENT_NAME"), job.name)
    from stepscope.export.to_wandb import open_wandb_beside

    return open_wandb_beside(job.name)


class LiveLogger:
    """Queues the runner's rows and verdicts; a thread logs them to the trackers. The
    live runner's observer (:class:`stepscope.rules.runner.Observer`)."""

    reads_rows = True

    def __init__(
        self,
        job: Job,
        kinds: Sequence[str],
        every_s: float = EVERY_S,
        system_rows: int = SYSTEM_ROWS,
    ) -> None:
        self.job, self.kinds, self.every_s = job, list(kinds), every_s
        self.system_rows = system_rows
        self.faults = FaultLog(job.store, socket.gethostname(), os.getpid(), {"rank": None})
        self.inbox: queue.Queue[tuple[str, object]] = queue.Queue(QUEUE)
        self.dropped = 0
        self.trackers: dict[str, Tracker] = {}
        self.steps: list[pd.DataFrame] = []
        self.system: list[pd.DataFrame] = []
        self.last = time.monotonic()
        self.last_step = -1  # the last step a point was logged at
        self.thread = threading.Thread(target=self._loop, name="stepscope-trackers", daemon=True)
        self.thread.start()

    # -- the runner's side: never blocks, never raises ----------------------------------
    def seen(self, frames: dict[str, pd.DataFrame]) -> None:
        if "steps" in frames or "system" in frames:
            try:
                self.inbox.put_nowait(("rows", frames))
            except queue.Full:
                self.dropped += 1

    def judged(self, results: list[RuleResult]) -> None:
        pass  # the running verdicts stay in the job: a tracker gets the final ones

    def ended(self, results: list[RuleResult]) -> None:
        # a thread stuck in a tracker takes nothing more: the verdicts are on disk
        with contextlib.suppress(queue.Full):
            self.inbox.put(("end", results), timeout=1.0)

    def close(self, wait_s: float = END_WAIT_S) -> None:
        """Wait for the last points, the verdicts and the runs' close (``wait_s`` at most)."""
        self.thread.join(wait_s)

    # -- the logging thread --------------------------------------------------------------
    def _fault(self, kind: str, what: str, exc: BaseException, drop: bool = True) -> None:
        line = f"{what}: {type(exc).__name__}: {exc}".splitlines()[0][:500]
        self.faults.record(f"export-{kind}", line, traceback=traceback.format_exc())
        if drop:
            self.trackers.pop(kind, None)  # left alone for the rest of the job

    def _each(self, what: str, call: Callable[[Tracker], object]) -> None:
        for kind, tracker in list(self.trackers.items()):
            try:
                call(tracker)
            except Exception as exc:
                self._fault(kind, what, exc)

    def _loop(self) -> None:
        for kind in self.kinds:
            try:
                self.trackers[kind] = open_tracker(kind, self.job)
            except Exception as exc:
                self._fault(kind, "opening the run", exc)
        while True:
            what, body = self.inbox.get()
            if what == "end":
                self._read_tail()
                self._flush()
                self._end(body)
                self.inbox.task_done()
                return
            assert isinstance(body, dict)
            self._add(body)
            if time.monotonic() - self.last >= self.every_s:
                self._flush()
            self.inbox.task_done()

    def _add(self, frames: dict[str, pd.DataFrame]) -> None:
        if not self.trackers:  # every tracker failed: nothing to keep
            return
        if "steps" in frames:
            self.steps.append(frames["steps"])
        if "system" in frames:
            self.system.append(frames["system"])
            self._bound_system()

    def _bound_system(self) -> None:
        """The newest ``system_rows`` samples at most (no step may come for long)."""
        extra = sum(len(f) for f in self.system) - self.system_rows
        while extra > 0:  # the oldest go first: whole frames, then the head of one
            oldest = self.system[0]
            if len(oldest) <= extra:
                self.system.pop(0)
            else:
                self.system[0] = oldest.iloc[extra:]
            extra -= min(len(oldest), extra)

    def _flush(self) -> None:
        """One point of the steps seen since the last."""
        import pandas as pd

        from stepscope.export._points import step_points

        self.last = time.monotonic()
        if not self.steps:
            return
        steps = pd.concat(self.steps, ignore_index=True)
        system = pd.concat(self.system, ignore_index=True) if self.system else None
        self.steps, self.system = [], self.system[-1:]  # a sample may span two points
        points = step_points(steps, system, max_points=1)
        if points:
            self.last_step = max(self.last_step, points[-1].step)
            self._each("logging metrics", lambda t: t.log_points(points))

    def _read_tail(self) -> None:
        """The steps the runner's last scan did not read (the final evaluation reads
        the job whole, not through the scans' readers)."""
        if not self.trackers:
            return
        try:
            steps = self.job.steps(phase="train")
            tail = steps[steps["step"] > self.last_step]
            seen = {int(s) for f in self.steps for s in f["step"].unique()}
            tail = tail[~tail["step"].isin(seen)]
            if len(tail):
                self.steps.append(tail)
                self.system.append(self.job.system(start=float(tail["start"].min())))
        except Exception as exc:  # the points logged so far stand; the verdicts go out
            self._fault("live", "reading the last steps", exc, drop=False)

    def _end(self, body: object) -> None:
        from stepscope.analysis.summary import summarize
        from stepscope.export._points import diagnosis_text, verdict_costs, verdict_tags

        results = body if isinstance(body, list) else []
        verdicts = [r.to_dict() for r in results]
        try:
            diagnosis = diagnosis_text(summarize(self.job)["diagnosis"])
        except Exception:  # the verdicts go out without it; the report says it in full
            diagnosis = "unavailable: see stepscope show"
        self._each(
            "logging the verdicts",
            lambda t: t.log_end(
                verdict_tags(verdicts, t.sep), verdict_costs(verdicts, t.sep), diagnosis
            ),
        )
        self._each("closing the run", lambda t: t.close(True))


def main(argv: Sequence[str] | None = None) -> int:
    """The live rule runner with trackers: ``--tracker NAME`` (repeatable), then the
    runner's own arguments. Nothing heavy is imported here: the runner waits for the
    job's first data before it imports the rules (and this module's loggers, numpy)."""
    from stepscope.rules.runner import main as runner_main

    p = argparse.ArgumentParser(prog="python -m stepscope.export.live", add_help=False)
    p.add_argument(
        "--tracker", action="append", choices=TRACKERS, default=[], help="log to it (repeatable)"
    )
    args, rest = p.parse_known_args(argv)
    return runner_main(rest, observe=lambda job: LiveLogger(job, args.tracker))


if __name__ == "__main__":
    from stepscope.process import exit_at_once

    exit_at_once(main())
