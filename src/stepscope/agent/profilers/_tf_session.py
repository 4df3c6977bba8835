"""The one TensorFlow profiler session of the process, shared by the windows.

TensorFlow runs one profiler session at a time (a second ``start`` raises). Both a
``detailed`` window (``_tf_detailed.py``) and a ``dataloader`` window
(``_tf_dataloader.py``) of a TensorFlow job use it. The rule (docs/tensorflow.md):
the detailed window has it. A dataloader window that opens while a detailed window
runs collects no ``tf.data`` events; a detailed window that opens while a dataloader
window holds the session ends that session first (the dataloader window keeps the
events of its steps so far). Each window's record says which happened.
All calls come from the training thread, at step boundaries.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

from stepscope.agent.profilers._sink import ArtifactSink


class TFSession:
    """One ``tf.profiler.experimental`` session into a staging folder of the sink."""

    current: TFSession | None = None  # the session of this process that runs, if any

    def __init__(self, owner: str, sink: ArtifactSink, host_level: int, python: bool) -> None:
        self.owner, self.sink = owner, sink
        self.host_level, self.python = host_level, python
        self.logdir: str | None = None
        self.ended_by: str | None = None  # the owner of the session that ended this one
        self.on_yield: Callable[[], None] | None = None  # called when that happens

    @staticmethod
    def _tf() -> Any:
        import tensorflow as tf

        return tf

    def start(self) -> None:
        """Start TensorFlow's profiler (raises what TensorFlow raises, e.g. when a
        profiler the script started itself runs)."""
        tf = self._tf()
        logdir = self.sink.staging_file(f"tf-profile-{id(self)}")
        os.makedirs(logdir, exist_ok=True)
        options = tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=self.host_level, python_tracer_level=1 if self.python else 0
        )
        try:
            tf.profiler.experimental.start(logdir, options=options)
        except Exception:
            shutil.rmtree(logdir, ignore_errors=True)
            raise
        self.logdir = logdir
        TFSession.current = self

    @property
    def running(self) -> bool:
        return TFSession.current is self

    def stop(self) -> str | None:
        """Stop the session if it still runs; its log folder (None if it never ran)."""
        if self.running:
            TFSession.current = None
            self._tf().profiler.experimental.stop()
        return self.logdir

    def yield_to(self, owner: str) -> None:
        """End this session now, for ``owner`` (a detailed window)."""
        if self.running:
            self.ended_by = owner
            self.stop()
            if self.on_yield is not None:
                self.on_yield()


def read_xplanes(logdir: str) -> list[bytes]:
    """The ``.xplane.pb`` files a session wrote (one per host)."""
    found = []
    for root, _dirs, names in os.walk(logdir):
        for name in sorted(names):
            if name.endswith(".xplane.pb"):
                with open(os.path.join(root, name), "rb") as f:
                    found.append(f.read())
    return found
