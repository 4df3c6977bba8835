"""Detailed profiling of a TensorFlow job: TensorFlow's own profiler over a window.

``tf.profiler.experimental.start`` and ``stop`` run on the training thread at step
boundaries; the profiler writes an XSpace protobuf (``<host>.xplane.pb``) under
``plugins/profile/<run>/`` of a staging folder. The background thread copies that
tree into the job as ``<base>.tf/plugins/profile/<run>/<host>.xplane.pb``: a log
folder that TensorBoard's profile plugin opens as it is
(``tensorboard --logdir <job>/profiling/rank-<r>/<base>.tf``, with
``pip install tensorboard-plugin-profile``). See docs/tensorflow.md.
"""

from __future__ import annotations

import os
import shutil

from stepscope.agent.profilers._sink import ArtifactSink, Export, Finish
from stepscope.config import ProfilingWindow


class TFDetailedProfiler:
    """``tf.profiler.experimental`` over a window (host traces; the TF ops and the
    Python tracer when the window asks for stacks)."""

    kind = "detailed"

    def __init__(self, window: ProfilingWindow, sink: ArtifactSink) -> None:
        self.window, self.sink = window, sink
        self._logdir: str | None = None

    def start(self) -> None:
        import tensorflow as tf

        logdir = self.sink.staging_file(f"tf-profile-{id(self)}")
        os.makedirs(logdir, exist_ok=True)
        options = tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=2, python_tracer_level=1 if self.window.with_stack else 0
        )
        tf.profiler.experimental.start(logdir, options=options)
        self._logdir = logdir

    def stop(self) -> Finish:
        import tensorflow as tf

        logdir, self._logdir = self._logdir, None
        assert logdir is not None  # start() ran: the scheduler pairs them
        tf.profiler.experimental.stop()
        return lambda sink, base: _export(logdir, sink, base)


def _export(logdir: str, sink: ArtifactSink, base: str) -> Export:
    """Copy the profiler's files into the job; the staging folder is removed."""
    files: list[str] = []
    total = 0
    try:
        for root, _dirs, names in os.walk(logdir):
            for name in sorted(names):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, logdir).replace(os.sep, "/")
                with open(path, "rb") as f:
                    data = f.read()
                total += len(data)
                key = sink.write(f"{base}.tf/{rel}", data)
                if key:
                    files.append(key)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    main = next((k for k in files if k.endswith(".xplane.pb")), None)
    return Export(main, files, {"viewer": "tensorboard-plugin-profile", "bytes": total})
