"""The launcher: ``stepscope run`` for one process or for torchrun.

It creates the job folder, puts the agent into the training process with no change
to the script (``_bootstrap/sitecustomize.py`` on ``PYTHONPATH``), starts the node's
helper processes (system sampler, live rule runner), keeps a heartbeat, forwards
signals, takes stop requests, and records how the job ended. :mod:`._launcher` runs
one node; :mod:`._torchrun` and :mod:`._dist_job` run torchrun jobs, one launcher
per node sharing one job folder (docs/distributed.md).
"""

from typing import TYPE_CHECKING

from stepscope.launch._torchrun import add_options, attach, prepare

if TYPE_CHECKING:
    from stepscope.launch._launcher import RunSpec, run

__all__ = ["RunSpec", "add_options", "attach", "prepare", "run"]


def __getattr__(name: str) -> object:
    # The launcher itself (subprocess, signals, the store) only when a job is run:
    # the CLI's parser needs add_options, and `stepscope ls` nothing of this.
    if name not in ("RunSpec", "run"):
        raise AttributeError(f"module 'stepscope.launch' has no attribute {name!r}")
    from stepscope.launch import _launcher

    return getattr(_launcher, name)
