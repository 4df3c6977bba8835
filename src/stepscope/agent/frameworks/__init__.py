"""The agent's framework seam: what a training framework tells the agent, and how.

The agent (recorder, writer, fault boundary, profiling scheduler, tensor writer) knows
no framework. A framework is an adapter that says, in its own terms, where the parts of
a step are and hands them to the recorder as :class:`StepEvents`:

* a **step boundary**: the end of one optimizer step (``on_optimizer_start``/``_end``;
  ``end_train_step`` where a loop has no optimizer call to hook);
* a **forward**: the outermost forward of the model (``on_forward_start``/``_end``,
  whether it trained, which tells a training step from an evaluation step);
* a **backward**: ``on_backward_start``/``on_backward``;
* a **data wait**: the time inside the input pipeline's ``next`` (``on_data``);
* a **device timer**: ``StepEvents.device``, set by the adapter once the process
  uses an accelerator (CUDA events for torch, agent/_cuda.py); None on CPU.

Times are ``time.perf_counter()`` seconds, read by the adapter at the event. Every
callback the adapter installs runs behind the fault boundary. :class:`Framework` is
the adapter's side: the agent attaches it once its module is imported (no import of
the framework by stepscope) and detaches it when the agent stops. The torch adapter
(:mod:`._torch`) and the TensorFlow and Keras ones (:mod:`._tensorflow`, which
share one set of hooks) sit side by side; none is a copy of the agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from stepscope.agent._agent import Agent
    from stepscope.agent._cuda import DeviceTimer


class StepEvents(Protocol):
    """What an adapter reports: :class:`stepscope.agent._recorder.StepRecorder` has it."""

    device: DeviceTimer | None

    def on_data(self, t0: float, t1: float) -> None: ...

    def on_forward_start(self, t: float) -> None: ...

    def on_forward_end(self, t: float, training: bool) -> None: ...

    def on_backward_start(self) -> None: ...

    def on_backward(self, t0: float, t1: float) -> None: ...

    def on_optimizer_start(self, t: float) -> None: ...

    def on_optimizer_end(self, t: float) -> None: ...

    def end_train_step(self, t: float) -> None: ...


class Framework(Protocol):
    """A training framework the agent can watch."""

    name: str  # recorded in the job's ``framework`` event ("torch")
    module: str  # the top-level module whose import makes the adapter attachable

    @property
    def attached(self) -> bool: ...

    def version(self) -> str | None:
        """The framework's version, once its module is imported."""
        ...

    def attach(self) -> None:
        """Install every hook (the module is imported); faults go to the boundary."""
        ...

    def detach(self) -> None:
        """Remove every hook; the framework's objects are as they were."""
        ...


def frameworks(agent: Agent) -> list[Framework]:
    """The adapters of every framework the agent knows, for one agent."""
    from stepscope.agent.frameworks._tensorflow import KerasFramework, TensorFlowFramework
    from stepscope.agent.frameworks._torch import TorchFramework

    torch, tf = TorchFramework(agent), TensorFlowFramework(agent)
    return [torch, tf, KerasFramework(tf, torch)]


__all__ = ["Framework", "StepEvents", "frameworks"]
