"""The TensorFlow adapter: TensorFlow 2.x and Keras 3 (any backend), beside torch's.

Attached once ``tensorflow`` is imported (Keras 3 on its TensorFlow backend imports
it): the TensorFlow hooks at once (:mod:`._tf_hooks`); the Keras ones once ``keras``
is imported, on whichever backend runs (:mod:`._keras_hooks`, :mod:`._keras_split`);
the output tensors through :mod:`._tf_capture`, the profiling windows through
TensorFlow's profiler (agent/profilers/_tf_trace.py). The recorder, the writer and
the fault boundary are the agent's, as for torch. See docs/tensorflow.md.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from stepscope.agent.frameworks._adapter import Adapter, HookedAdapter
from stepscope.agent.frameworks._tf_capture import TFCapture
from stepscope.agent.frameworks._tf_hooks import TFHooks

if TYPE_CHECKING:
    from stepscope.agent._agent import Agent
    from stepscope.agent.frameworks._torch import TorchFramework


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


class KerasFramework(Adapter):
    """Keras 3, attached once ``keras`` has finished importing: its hooks go on the
    TensorFlow adapter's, whatever its backend. On the PyTorch backend (whose layers
    are torch modules) Keras times the forwards and owns the loss of its steps; the
    torch adapter keeps ``backward()`` and the DataLoader (docs/tensorflow.md)."""

    name = "keras"
    module = "keras"

    def __init__(self, tf: TensorFlowFramework, torch: TorchFramework | None = None) -> None:
        super().__init__(tf.agent)
        self.tf, self.torch = tf, torch
        self._attached = False
        self._capture = False  # the capture is ours (TensorFlow was not attached)

    @property
    def attached(self) -> bool:
        return self._attached

    def detail(self) -> dict[str, object]:
        """More for the ``framework`` event: the Keras backend that runs."""
        config = getattr(sys.modules.get(self.module), "config", None)
        backend = getattr(config, "backend", None)
        return {"backend": str(backend())} if callable(backend) else {}

    def attach(self) -> None:
        hooks, agent = self.tf.hooks, self.tf.agent
        try:
            hooks.install_keras()
            self._attached = True
            if hooks.backend == "torch" and self.torch is not None and self.torch.attached:
                self.torch.hooks.yield_forwards()  # Keras' layers are torch modules
                hooks.torch_timers = self.torch.hooks.timers
        except Exception as exc:
            agent.faults.record("step-hooks", exc)
            return
        try:  # Keras' logs, on a backend that imports no TensorFlow
            if agent.tensors is not None and hooks.capture is None:
                hooks.capture = TFCapture(agent.tensors, agent.recorder, agent.faults)
                hooks.capture.install()
                self._capture = True
        except Exception as exc:
            agent.faults.record("tensors", exc)

    def detach(self) -> None:
        hooks = self.tf.hooks
        try:
            if self._capture and hooks.capture is not None:
                hooks.capture.remove()
                hooks.capture = None
            hooks.torch_timers = None
            hooks.remove_keras()
        except Exception as exc:
            self.tf.agent.faults.record("step-hooks", exc)
        self._attached = self._capture = False
