"""What the framework adapters (:mod:`._torch`, :mod:`._tensorflow`) share: their agent,
their module's version, and calls behind the agent's fault boundary."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:
    from stepscope.agent._agent import Agent

P = ParamSpec("P")


class Hooks(Protocol):
    """An adapter's set of hooks: whether they are on."""

    @property
    def installed(self) -> bool: ...


H = TypeVar("H", bound=Hooks)


class Adapter:
    """The base of a :class:`~stepscope.agent.frameworks.Framework` adapter; a subclass
    sets ``name`` and ``module`` and says whether it is ``attached``."""

    name: str
    module: str

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def version(self) -> str | None:
        """The ``__version__`` of the adapter's module, once it is imported."""
        return str(getattr(sys.modules.get(self.module), "__version__", "")) or None

    def guarded(
        self, fault: str, call: Callable[P, object], *args: P.args, **kwargs: P.kwargs
    ) -> bool:
        """``call(*args, **kwargs)``, an exception recorded as a ``fault`` of the agent's
        fault boundary (training goes on without what failed): whether it returned."""
        try:
            call(*args, **kwargs)
        except Exception as exc:
            self.agent.faults.record(fault, exc)
            return False
        return True


class HookedAdapter(Adapter, Generic[H]):
    """An adapter attached while its ``hooks`` are installed."""

    def __init__(self, agent: Agent, hooks: H) -> None:
        super().__init__(agent)
        self.hooks = hooks

    @property
    def attached(self) -> bool:
        return self.hooks.installed
