"""Detailed profiling of a TensorFlow job: TensorFlow's own profiler over a window.

``tf.profiler.experimental.start`` and ``stop`` run on the training thread at step
boundaries (``_tf_session.py``: one session per process, which a detailed window
takes from a dataloader window); the profiler writes an XSpace protobuf
(``<host>.xplane.pb``) under ``plugins/profile/<run>/`` of a staging folder. The
background thread copies that tree into the job as
``<base>.tf/plugins/profile/<run>/<host>.xplane.pb``: a log folder that TensorBoard's
profile plugin opens as it is (``tensorboard --logdir <job>/profiling/rank-<r>/<base>.tf``,
with ``pip install tensorboard-plugin-profile``), and writes the window's operator
table, ``<base>.operators.json`` (``_tf_ops.py``). See docs/tensorflow.md.
"""

from __future__ import annotations

import os
import shutil

from stepscope.agent.profilers import _tf_xplane as xplane
from stepscope.agent.profilers._sink import JSON, ArtifactSink, Export, Finish
from stepscope.agent.profilers._tf_ops import Operator, top_operators
from stepscope.agent.profilers._tf_session import TFSession
from stepscope.config import ProfilingWindow


class TFDetailedProfiler:
    """``tf.profiler.experimental`` over a window (host traces; the TF ops and the
    Python tracer when the window asks for stacks)."""

    kind = "detailed"

    def __init__(self, window: ProfilingWindow, sink: ArtifactSink) -> None:
        self.window, self.sink = window, sink
        self._session: TFSession | None = None
        self._failed = "the profiler never started"

    def start(self) -> None:
        held = TFSession.current
        if held is not None and held.owner == "dataloader":
            held.yield_to("detailed")  # the detailed window has TensorFlow's profiler
        session = TFSession("detailed", self.sink, 2, self.window.with_stack)
        try:
            session.start()
        except Exception as exc:  # e.g. the script runs TensorFlow's profiler itself
            self._failed = f"TensorFlow's profiler did not start: {type(exc).__name__}: {exc}"
            raise  # the scheduler records the fault
        self._session = session

    def stop(self) -> Finish:
        session, self._session = self._session, None
        logdir = session.stop() if session is not None else None
        if logdir is None:  # start failed (a fault): the record says why, no files
            failed: dict[str, JSON] = {"bytes": 0, "operators": self._failed}
            return lambda _sink, _base: Export(None, [], failed)
        return lambda sink, base: _export(logdir, sink, base)


def _export(logdir: str, sink: ArtifactSink, base: str) -> Export:
    """Copy the profiler's files into the job, then the operator table; the staging
    folder is removed."""
    files: list[str] = []
    total = 0
    planes: list[bytes] = []
    try:
        for root, _dirs, names in os.walk(logdir):
            for name in sorted(names):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, logdir).replace(os.sep, "/")
                with open(path, "rb") as f:
                    data = f.read()
                total += len(data)
                if name.endswith(".xplane.pb"):
                    planes.append(data)
                key = sink.write(f"{base}.tf/{rel}", data)
                if key:
                    files.append(key)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    main = next((k for k in files if k.endswith(".xplane.pb")), None)
    details: dict[str, JSON] = {"viewer": "tensorboard-plugin-profile", "bytes": total}
    ops = _operators(planes, sink, details)
    if ops is not None:
        table = sink.write_json(f"{base}.operators.json", {"operators": ops})
        files += [table] if table else []
        details["top"] = ops[:5]
    return Export(main, files, details)


def _operators(
    planes: list[bytes], sink: ArtifactSink, details: dict[str, JSON]
) -> list[Operator] | None:
    """The table of the window's first XSpace; None (said in the record, the error in
    faults/) when there is none or it cannot be read."""
    if not planes:
        details["operators"] = "TensorFlow's profiler wrote no .xplane.pb"
        return None
    try:
        return top_operators(xplane.load(planes[0]))
    except Exception as exc:
        sink.faults.record("profiling", exc)
        details["operators"] = f"no operator table: {type(exc).__name__}: {exc}"
        return None
