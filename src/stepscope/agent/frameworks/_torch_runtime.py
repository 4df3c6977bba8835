"""The CPU facts of a torch process, for the CPU rules: threads and DataLoaders.

Two events (docs/format.md), each written once per fact, never per step:

* ``threads`` at the end of the first training step (after the script has set its
  thread counts; at the agent's stop if no step ever ended): torch's intra-op and
  inter-op threads, the cores the process may run on (``os.sched_getaffinity``),
  the host's cores, and ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` as set.
* ``dataloader`` when a DataLoader's iterator is made (``DataLoader.__iter__``, once
  an epoch) with settings not recorded before for that loader: ``num_workers``,
  ``batch_size``, ``prefetch_factor``, ``persistent_workers``, ``pin_memory``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from stepscope.agent._faults import FaultBoundary

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

Event = Callable[..., None]  # AgentWriter.event(kind, **detail)
MAX_LOADERS = 256  # settings remembered, so that a loop making loaders never grows memory


def thread_facts() -> dict[str, object]:
    """torch's thread counts and the cores this process may use, read now."""
    import torch

    getaffinity = getattr(os, "sched_getaffinity", None)
    return {
        "intra_op": torch.get_num_threads(),
        "inter_op": torch.get_num_interop_threads(),
        "affinity": len(getaffinity(0)) if getaffinity is not None else None,
        "cpu_count": os.cpu_count(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "mkl_num_threads": os.environ.get("MKL_NUM_THREADS"),
    }


def loader_facts(loader: DataLoader[object]) -> dict[str, object]:
    """The settings of ``loader`` that say how its batches are made."""
    return {
        "num_workers": int(loader.num_workers),
        "batch_size": loader.batch_size,
        "prefetch_factor": loader.prefetch_factor,
        "persistent_workers": bool(loader.persistent_workers),
        "pin_memory": bool(loader.pin_memory),
    }


class RuntimeFacts:
    """Records ``threads`` once and each DataLoader's settings; faults go to the boundary."""

    def __init__(self, event: Event, faults: FaultBoundary) -> None:
        self.event, self.faults = event, faults
        self.threads_recorded = False
        self._seen: set[tuple[int, str]] = set()
        self._original: Callable[..., object] | None = None

    def record_threads(self) -> None:
        """Write the ``threads`` event, once per process."""
        if self.threads_recorded:
            return
        self.threads_recorded = True
        try:
            self.event("threads", **thread_facts())
        except Exception as exc:
            self.faults.record("runtime-facts", exc)

    def install(self) -> None:
        """Wrap ``DataLoader.__iter__`` (torch is imported)."""
        from torch.utils.data import DataLoader

        original = DataLoader.__iter__
        self._original = original
        facts = self

        def __iter__(loader: DataLoader[object]) -> object:
            it = original(loader)
            facts.on_iter(loader)
            return it

        DataLoader.__iter__ = __iter__  # type: ignore[method-assign,assignment]

    def remove(self) -> None:
        """Put ``DataLoader.__iter__`` back."""
        if self._original is not None:
            from torch.utils.data import DataLoader

            DataLoader.__iter__ = self._original  # type: ignore[method-assign,assignment]
            self._original = None

    def on_iter(self, loader: DataLoader[object]) -> None:
        """Record ``loader``'s settings if they are new for it."""
        try:
            detail = loader_facts(loader)
            key = (id(loader), repr(sorted(detail.items())))
            if key in self._seen:
                return
            if len(self._seen) >= MAX_LOADERS:
                self._seen.clear()
            self._seen.add(key)
            self.event("dataloader", **detail)
        except Exception as exc:
            self.faults.record("runtime-facts", exc)
