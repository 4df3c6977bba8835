"""stepscope: a training debugger and profiler for PyTorch.

Importing this package does nothing: no threads, no hooks, no torch import.
Names are resolved lazily so that ``import stepscope`` stays cheap inside a
training process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

__all__ = [
    "Job",
    "__version__",
    "compare",
    "init",
    "list_jobs",
    "open",
    "record_scalar",
    "shutdown",
    "step",
]

_LAZY = {
    "Job": ("stepscope.read", "Job"),
    # a Job that also displays itself in a notebook (stepscope.notebook)
    "open": ("stepscope.notebook", "open"),
    "list_jobs": ("stepscope.notebook", "list_jobs"),
    "compare": ("stepscope.notebook", "compare"),
    "init": ("stepscope.agent.api", "init"),
    "shutdown": ("stepscope.agent.api", "shutdown"),
    "step": ("stepscope.agent.api", "step"),
    "record_scalar": ("stepscope.agent.tensors", "record_scalar"),
}

if TYPE_CHECKING:
    from stepscope.agent.api import init, shutdown, step
    from stepscope.agent.tensors import record_scalar
    from stepscope.notebook import compare, list_jobs, open
    from stepscope.read import Job


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'stepscope' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    return getattr(importlib.import_module(module), attr)
