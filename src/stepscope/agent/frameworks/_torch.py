"""The torch adapter: step hooks, collectives, tensor capture and profiler windows.

What it hooks is in :mod:`._torch_hooks` (optimizers, root modules' forwards,
``backward()``, the DataLoader's ``next``, GradScaler), :mod:`._torch_timers` and
:mod:`._torch_collectives` (``torch.distributed``); the tensor capture and the
profiling windows attach to those hooks once torch is imported.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from stepscope.agent.frameworks._torch_collectives import CollectiveTimer
from stepscope.agent.frameworks._torch_hooks import TorchHooks
from stepscope.agent.frameworks._torch_runtime import RuntimeFacts

if TYPE_CHECKING:
    from stepscope.agent._agent import Agent


class TorchFramework:
    """PyTorch, attached once ``torch`` is imported."""

    name = "torch"
    module = "torch"

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.hooks = TorchHooks(agent.recorder, agent.faults)
        self.collectives = CollectiveTimer(agent.recorder, agent.faults)
        # threads and DataLoader settings, for the CPU rules (docs/format.md, events)
        self.runtime = RuntimeFacts(agent.writer.event, agent.faults)
        self.hooks.on_first_step = self.runtime.record_threads

    @property
    def attached(self) -> bool:
        return self.hooks.installed

    def version(self) -> str | None:
        torch = sys.modules.get(self.module)
        return str(getattr(torch, "__version__", "")) or None

    def attach(self) -> None:
        agent, faults = self.agent, self.agent.faults
        try:
            self.hooks.install()
        except Exception as exc:
            faults.record("step-hooks", exc)
        try:
            if agent.tensors is not None and self.hooks.installed:
                agent.tensors.install(self.hooks)
        except Exception as exc:
            faults.record("tensors", exc)
        if agent.profiling is not None and self.hooks.installed:
            agent.profiling.attach()
        try:  # after the hooks: it wraps their backward wrapper
            self.collectives.install()
        except Exception as exc:
            faults.record("collectives", exc)
        try:
            self.runtime.install()
        except Exception as exc:
            faults.record("runtime-facts", exc)

    def detach(self) -> None:
        self.runtime.record_threads()  # a loop without optimizer steps: at its end
        try:
            self.runtime.remove()
            self.collectives.remove()  # before the hooks: it wraps their wrapper
            self.hooks.remove()
        except Exception as exc:
            self.agent.faults.record("step-hooks", exc)
