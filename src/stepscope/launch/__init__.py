"""The launcher: ``stepscope run`` for one process or for torchrun.

It creates the job folder, puts the agent into the training process with no change
to the script (``_bootstrap/sitecustomize.py`` on ``PYTHONPATH``), starts the node's
helper processes (system sampler, live rule runner), keeps a heartbeat, forwards
signals, takes stop requests, and records how the job ended. :mod:`._launcher` runs
one node; :mod:`._torchrun` and :mod:`._dist_job` run torchrun jobs, one launcher
per node sharing one job folder (docs/distributed.md).
"""

from stepscope.launch._launcher import RunSpec, run
from stepscope.launch._torchrun import add_options, attach, prepare

__all__ = ["RunSpec", "add_options", "attach", "prepare", "run"]
