"""run_cost.py's probe: the CPU each of stepscope's processes used, read as it exits.

On ``PYTHONPATH`` under ``stepscope run`` (the agent's ``sitecustomize`` runs it after
its own in the training, where it does nothing). In the launcher, the sampler and the
rule runner it appends one JSON line to ``$STEPSCOPE_COST_LOG`` when the process
ends (``os._exit``, as the helpers end, or ``atexit``): its role, user + system CPU
seconds from ``/proc/self/stat``, and the heavy modules it had imported.
"""

from __future__ import annotations

import atexit
import json
import os
import sys

HEAVY = ("numpy", "pandas", "pyarrow", "duckdb", "psutil", "fsspec", "torch")
ROLES = (
    ("stepscope.sampler.main", "sampler"),
    ("stepscope.rules.runner", "rules"),
    ("stepscope.export.live", "rules"),
    ("stepscope.cli", "launcher"),
)


def _role() -> str | None:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except OSError:
        return None
    return next((role for module, role in ROLES if module in argv), None)


def _cpu() -> float:
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _record(role: str, log: str) -> None:
    heavy = sorted(m for m in HEAVY if m in sys.modules)
    line = {"role": role, "pid": os.getpid(), "cpu": _cpu(), "heavy": heavy}
    with open(log, "a") as f:
        f.write(json.dumps(line) + "\n")


def _install() -> None:
    log, role = os.environ.get("STEPSCOPE_COST_LOG"), _role()
    if not log or role is None:
        return
    real_exit = os._exit

    def _exit(code: int) -> None:  # the helpers end so, without atexit
        _record(role, log)
        real_exit(code)

    os._exit = _exit  # type: ignore[assignment]
    atexit.register(_record, role, log)


_install()
