"""The torch adapter: step hooks, collectives, tensor capture and profiler windows.

What it hooks is in :mod:`._torch_hooks` (optimizers, root modules' forwards,
``backward()``, the DataLoader's ``next``, GradScaler), :mod:`._torch_timers` and
:mod:`._torch_collectives` (``torch.distributed``); the tensor capture and the
profiling windows attach to those hooks once torch is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stepscope.agent.frameworks._adapter import HookedAdapter
from stepscope.agent.frameworks._torch_collectives import CollectiveTimer
from stepscope.agent.frameworks._torch_compile import CompileWatch
from stepscope.agent.frameworks._torch_hooks import TorchHooks
from stepscope.agent.frameworks._torch_runtime import RuntimeFacts

if TYPE_CHECKING:
    from stepscope.agent._agent import Agent


class TorchFramework(HookedAdapter[TorchHooks]):
    """PyTorch, attached once ``torch`` is imported."""

    name = "torch"
    module = "torch"

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent, TorchHooks(agent.recorder, agent.faults))
        self.collectives = CollectiveTimer(agent.recorder, agent.faults)
        # threads and DataLoader settings, for the CPU rules (docs/format.md, events)
        self.runtime = RuntimeFacts(agent.writer.event, agent.faults)
        self.hooks.on_first_step = self.runtime.record_threads
        # torch.compile's graph breaks and recompilations, read on the writer's thread
        self.compile = CompileWatch(agent.writer.event, agent.faults)

    def attach(self) -> None:
        agent = self.agent
        self.guarded("step-hooks", self.hooks.install)
        if agent.tensors is not None and self.hooks.installed:
            self.guarded("tensors", agent.tensors.install, self.hooks)
        if agent.profiling is not None and self.hooks.installed:
            agent.profiling.attach()
        # after the hooks: it wraps their backward wrapper
        self.guarded("collectives", self.collectives.install)
        self.guarded("runtime-facts", self.runtime.install)
        agent.writer.followers.append(self.compile.poll)

    def detach(self) -> None:
        self.runtime.record_threads()  # a loop without optimizer steps: at its end
        self.compile.finish()  # the last read, and the totals
        self.guarded("step-hooks", self._remove)

    def _remove(self) -> None:
        self.runtime.remove()
        self.collectives.remove()  # before the hooks: it wraps their wrapper
        self.hooks.remove()
