"""Data-loader profiling of a TensorFlow job: ``tf.data``'s own trace events.

In Keras ``fit`` the input pipeline runs inside the compiled train function: no
Python ``next`` is called, so the hooks see no batch. Over a ``dataloader`` window
this profiler also runs TensorFlow's profiler (host tracer, ``_tf_session.py``) and,
at export (background thread), reads ``tf.data``'s ``Iterator::...`` events from
the XSpace (``_tf_data.py``):

* ``DataLoader.wait`` rows: one per ``GetNext`` of a pipeline's root iterator
  (``Iterator::Root``), the time the step waited for its batch; only when no Python
  ``next`` was seen in the window (a custom loop keeps its Python rows, as on torch);
* ``TFData.stage`` rows: one per pipeline stage (``Iterator::Root::Prefetch::Map``...),
  its ``GetNext`` calls, total, median and max time.

The window's summary says where the waits came from (``tf_data``). See
docs/tensorflow.md for how it shares TensorFlow's profiler with a detailed window.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from stepscope.agent.profilers import _tf_data
from stepscope.agent.profilers._dataloader import (
    BATCH_METRIC,
    Collected,
    DataloaderProfiler,
    _export,
)
from stepscope.agent.profilers._sink import JSON, ArtifactSink, Export, Finish
from stepscope.agent.profilers._tf_session import TFSession, read_xplanes
from stepscope.config import ProfilingWindow

if TYPE_CHECKING:
    from stepscope.agent._recorder import StepRecorder

# tf.data's iterator events are traced from host tracer level 1 (the cheapest).
HOST_LEVEL = 1


class TFDataloaderProfiler(DataloaderProfiler):
    """The Python ``next`` timing of :class:`DataloaderProfiler`, and ``tf.data``'s events."""

    def __init__(
        self,
        window: ProfilingWindow,
        recorder: StepRecorder,
        wall: Callable[[float], float],
        sink: ArtifactSink,
    ) -> None:
        super().__init__(window, recorder, wall)
        self.sink = sink
        self.session: TFSession | None = None
        self.first = 0
        self.until: int | None = None  # once a detailed window took over: the first step left
        self.note: str | None = None  # why no tf.data events were collected
        self.starts: list[tuple[int, int]] = []  # (training step, Unix ns of its start)

    def start(self) -> None:
        super().start()
        self.first = self.recorder.train_steps
        self.starts = [(self.first, time.time_ns())]
        if not (self.regex.search(BATCH_METRIC) or self.regex.search(_tf_data.STAGE_METRIC)):
            self.note = "metrics_regex selects no tf.data metric"
            return
        held = TFSession.current
        if held is not None:
            self.note = (
                f"a {held.owner} window held TensorFlow's profiler (one session per "
                "process): no tf.data events in this window"
            )
            return
        session = TFSession("dataloader", self.sink, HOST_LEVEL, False)
        try:
            session.start()
        except Exception as exc:  # e.g. the script runs TensorFlow's profiler itself
            self.sink.faults.record("profiling", exc)
            self.note = f"TensorFlow's profiler did not start: {type(exc).__name__}: {exc}"
            return
        session.on_yield = self._yielded
        self.session = session
        self.recorder.listen(self._boundary)

    def _boundary(self, phase: str, step: int, _t: float) -> None:
        """A listener of the recorder: when each training step of the window starts."""
        if phase == "train" and step >= self.first and self.session is not None:
            self.starts.append((step + 1, time.time_ns()))

    def _yielded(self) -> None:
        """A detailed window took TensorFlow's profiler (training thread)."""
        self.until = self.recorder.train_steps
        self.recorder.unlisten(self._boundary)

    def stop(self) -> Finish:
        rows = self.collect()
        session, self.session = self.session, None
        logdir = None
        if session is not None:
            self.recorder.unlisten(self._boundary)
            logdir = session.stop()
        info = self._info()
        starts, regex = self.starts, self.regex
        want = (bool(regex.search(BATCH_METRIC)), bool(regex.search(_tf_data.STAGE_METRIC)))
        return lambda sink, base: _tf_export(sink, base, rows, logdir, starts, info, want)

    def _info(self) -> dict[str, JSON]:
        """The summary's ``tf_data``: what was collected, and why not when it was not."""
        if self.note is not None:
            return {"collected": False, "reason": self.note}
        info: dict[str, JSON] = {"collected": True}
        if self.until is not None:
            info["until_step"] = self.until
            info["reason"] = (
                f"a detailed window took TensorFlow's profiler at step {self.until}: "
                "the tf.data events stop there"
            )
        return info


def _tf_export(
    sink: ArtifactSink,
    base: str,
    rows: Collected,
    logdir: str | None,
    starts: list[tuple[int, int]],
    info: dict[str, JSON],
    want: tuple[bool, bool],
) -> Export:
    """Background thread: the tf.data rows from the session's XSpace, then the file;
    ``want``: whether ``metrics_regex`` selects the waits, the stages."""
    waits, fetches, workers, seconds = rows
    stages: list[dict[str, JSON]] = []
    try:
        if logdir is not None:
            found = _tf_data.read(read_xplanes(logdir), starts)
            if not waits:  # no Python next: the compiled function's GetNext are the waits
                waits = found.waits if want[0] else []
                info["waits_from"] = "tf.data" if waits else "none"
            else:
                info["waits_from"] = "python"
            stages = found.stages if want[1] else []
    except Exception as exc:
        sink.faults.record("profiling", exc)
        reason = f"tf.data events unreadable: {type(exc).__name__}: {exc}"
        info.update(collected=False, reason=reason)
    finally:
        if logdir is not None:
            shutil.rmtree(logdir, ignore_errors=True)
    return _export(
        sink, base, waits, fetches, workers, seconds, {"tf_data": info}, {"stages": stages}
    )
