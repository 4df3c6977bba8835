"""Starting and stopping the launcher's helper processes.

``stepscope run`` runs the node's system sampler and the live rule runner
beside the training, each in its own process, at a lower CPU priority (see
``_background``). This module builds their command lines, starts them, and
at the end of the job waits for them to flush what they hold.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

from stepscope.process import HELPER_NICE, helper_env

if TYPE_CHECKING:  # the launcher imports this module: no import cycle at run time
    from stepscope.launch._launcher import RunSpec
    from stepscope.store import Store

HELPER_WAIT_S = 120


def _python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def _spawn(cmd: list[str]) -> subprocess.Popen[bytes]:
    # a new session: a Ctrl-C at the terminal must not kill a helper before its
    # flush (the sampler) or its final scan (the rule runner)
    return subprocess.Popen(cmd, env=helper_env(os.environ), start_new_session=True)


def _sampler_cmd(spec: RunSpec, store: Store, child_pid: int, me: str) -> list[str]:
    return _python_module(
        "stepscope.sampler.main",
        *("--job-url", store.url, "--node", spec.node, "--interval-ms", str(spec.interval_ms)),
        *("--watch-pid", str(child_pid), "--parent-pid", me),
        *(spec.dist.sampler_args() if spec.dist is not None else []),
        *("--nice", str(HELPER_NICE)),
    )


def _rules_cmd(store: Store, me: str) -> list[str]:
    return _python_module(
        "stepscope.rules.runner",
        *("--job-url", store.url, "--parent-pid", me, "--nice", str(HELPER_NICE)),
    )


def start_helpers(spec: RunSpec, store: Store, child_pid: int) -> list[subprocess.Popen[bytes]]:
    """The node's sampler and the live rule runner, each in its own process."""
    me = str(os.getpid())
    procs = [_spawn(_sampler_cmd(spec, store, child_pid, me))]
    if spec.rules and importlib.util.find_spec("stepscope.rules.runner") is not None:
        procs.append(_spawn(_rules_cmd(store, me)))
    return procs


def stop_helpers(procs: list[subprocess.Popen[bytes]]) -> None:
    """Ask the sampler to stop and wait for every helper to finish its last write."""
    sampler, *others = procs
    sampler.send_signal(signal.SIGTERM)
    for proc in [sampler, *others]:  # the rule runner finishes its final scan by itself
        try:
            proc.wait(timeout=HELPER_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
