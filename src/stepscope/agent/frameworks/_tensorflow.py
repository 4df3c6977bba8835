"""The TensorFlow adapter: TensorFlow 2.x and Keras 3 (TensorFlow backend), beside torch's.

Attached once ``tensorflow`` is imported (Keras 3 on its TensorFlow backend imports
it): the TensorFlow hooks at once, the Keras ones once ``keras`` is imported too
(:mod:`._tf_hooks`); the output tensors through :mod:`._tf_capture`, the profiling
windows through TensorFlow's profiler (agent/profilers/_tf_trace.py). The recorder,
the writer and the fault boundary are the agent's, as for torch. See
docs/tensorflow.md.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from stepscope.agent.frameworks._adapter import HookedAdapter
from stepscope.agent.frameworks._tf_capture import TFCapture
from stepscope.agent.frameworks._tf_hooks import TFHooks

if TYPE_CHECKING:
    from stepscope.agent._agent import Agent


class TensorFlowFramework(HookedAdapter[TFHooks]):
    """TensorFlow 2.x, attached once ``tensorflow`` is imported."""

    name = "tensorflow"
    module = "tensorflow"

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent, TFHooks(agent.recorder, agent.faults))
        self.hooks.event = agent.writer.event

    def attach(self) -> None:
        if not self.guarded("step-hooks", self.hooks.install):
            return
        self.guarded("tensors", self._capture)
        if self.agent.profiling is not None:
            self.agent.profiling.attach()

    def _capture(self) -> None:
        tensors = self.agent.tensors
        if tensors is not None and self.hooks.capture is None:
            self.hooks.capture = TFCapture(tensors, self.agent.recorder, self.agent.faults)
            self.hooks.capture.install()

    def detach(self) -> None:
        self.guarded("step-hooks", self._remove)

    def _remove(self) -> None:
        if self.hooks.capture is not None:
            self.hooks.capture.remove()
            self.hooks.capture = None
        self.hooks.remove()


class KerasFramework:
    """Keras 3, attached once ``keras`` has finished importing (after TensorFlow, which
    its TensorFlow backend imports): its hooks go on the TensorFlow adapter's."""

    name = "keras"
    module = "keras"

    def __init__(self, tf: TensorFlowFramework) -> None:
        self.tf = tf
        self._attached = False

    @property
    def attached(self) -> bool:
        return self._attached

    def version(self) -> str | None:
        return _version(self.module)

    def attach(self) -> None:
        try:
            self.tf.hooks.install_keras()
            self._attached = True
        except Exception as exc:
            self.tf.agent.faults.record("step-hooks", exc)

    def detach(self) -> None:
        try:
            self.tf.hooks.remove_keras()
        except Exception as exc:
            self.tf.agent.faults.record("step-hooks", exc)
        self._attached = False


def _version(module: str) -> str | None:
    return str(getattr(sys.modules.get(module), "__version__", "")) or None
