from __future__ import annotations

from typing import TYPE_CHECKING

from stepscope.agent.frameworks._adapter import Adapter, HookedAdapter
from stepscope.agent.frameworks._tf_capture import TFCapture
from stepscope.agent.frameworks._tf_hooks import TFHooks

if TYPE_CHECKING:
    from stepscope.agent._agent import Agent
    from stepscope.agent.tensors import TensorCapture


class TensorFlowFramework(HookedAdapter[TFHooks]):
    """TensorFlow 2.x, attached once ``tensorflow`` is imported."""

    name = "tensorflow"
    module = "tensorflow"

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent, TFHooks(agent.recorder, agent.faults))
        self.hooks.event = agent.writer.event

    def attach(self) -> None:
        agent = self.agent
        if not self.guarded("step-hooks", self.hooks.install):
            return
        if agent.tensors is not None and self.hooks.capture is None:
            self.guarded("tensors", self._capture, agent.tensors)
        if agent.profiling is not None:
            agent.profiling.attach()

    def _capture(self, tensors: TensorCapture) -> None:
        self.hooks.capture = TFCapture(tensors, self.agent.recorder, self.agent.faults)
        self.hooks.capture.install()

    def detach(self) -> None:
        self.guarded("step-hooks", self._remove)

    def _remove(self) -> None:
        if self.hooks.capture is not None:
            self.hooks.capture.remove()
            self.hooks.capture = None
        self.hooks.remove()


class KerasFramework(Adapter):
    """Keras 3, attached once ``keras`` has finished importing (after TensorFlow, which
    its TensorFlow backend imports): its hooks go on the TensorFlow adapter's."""

    name = "keras"
    module = "keras"

    def __init__(self, tf: TensorFlowFramework) -> None:
        super().__init__(tf.agent)
        self.tf = tf
        self._attached = False

    @property
    def attached(self) -> bool:
        return self._attached

    def attach(self) -> None:
        if self.guarded("step-hooks", self.tf.hooks.install_keras):
            self._attached = True

    def detach(self) -> None:
        self.guarded("step-hooks", self.tf.hooks.remove_keras)
        self._attached = False
