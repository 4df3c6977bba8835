"""Start the agent inside a process launched by ``stepscope run``.

The launcher puts ``stepscope/agent/_bootstrap`` first on ``PYTHONPATH``; its
``sitecustomize`` calls :func:`start_from_env`. This is the only place where the
agent reads the environment: ``STEPSCOPE_AGENT`` holds the resolved settings
as JSON (its ``clock`` holds the node's clock offset, docs/distributed.md, its
``timeline_s`` the job clock's monotonic offset, agent/_clock.py);
torch's ``RANK``/``LOCAL_RANK`` say which rank this is, else the settings' ``rank``
(a TensorFlow worker's, which the launcher took from ``TF_CONFIG``: docs/tensorflow.md),
else 0; ``STEPSCOPE_NATIVE_HOOKS=0`` turns the hooks' C fast path off.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping
from types import FrameType
from typing import Any

from stepscope.agent._agent import Agent, AgentSettings
from stepscope.agent._rank_exit import RankExit
from stepscope.jobfolder import use_clock

ENV_VAR = "STEPSCOPE_AGENT"

_agent: Agent | None = None
_exit: RankExit | None = None


_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def is_torch_launcher(argv: list[str], orig_argv: list[str]) -> bool:
    """True in torchrun's own process: it carries no training, its workers do."""
    if argv and os.path.basename(argv[0]) == "torchrun":
        return True
    return any(
        orig_argv[i : i + 2] == ["-m", m] for m in _LAUNCHER_MODULES for i in range(len(orig_argv))
    )


def native_hooks_from_env(env: Mapping[str, str] = os.environ) -> bool:
    """``STEPSCOPE_NATIVE_HOOKS=0``: the escape hatch if the C hooks ever misbehave."""
    return env.get("STEPSCOPE_NATIVE_HOOKS", "1") != "0"


def settings_from_env(env: Mapping[str, str]) -> AgentSettings | None:
    raw = env.get(ENV_VAR)
    if not raw or is_torch_launcher(sys.argv, getattr(sys, "orig_argv", [])):
        return None
    spec: dict[str, Any] = json.loads(raw)
    clock: dict[str, Any] = spec.get("clock") or {}
    return AgentSettings(
        job_url=spec["job_url"],
        node=spec["node"],
        rank=int(env.get("RANK", spec.get("rank", 0))),
        local_rank=int(env.get("LOCAL_RANK", "0")),
        flush_s=float(spec.get("flush_s", 2.0)),
        config=spec.get("config", {}),
        clock_offset_s=float(clock.get("offset_s") or 0.0),
        clock_skew_s=float(clock.get("skew_s") or 0.0),
        timeline_s=_seconds(spec.get("timeline_s")),
        native_hooks=native_hooks_from_env(env),
    )


def _seconds(value: object) -> float | None:
    """The job clock's offset from the settings (None: an older launcher gave none)."""
    return float(value) if isinstance(value, int | float) else None


def _flush_on_sigterm() -> None:
    """Write the last steps before a default SIGTERM death, then die the same way."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        if _exit is not None:
            _exit.terminated(signal.Signals(signum).name)
        if _agent is not None:
            _agent.stop()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, handler)


def start_from_env(env: Mapping[str, str] | None = None) -> Agent | None:
    """Start the agent if this process was launched by ``stepscope run``."""
    global _agent, _exit
    settings = settings_from_env(os.environ if env is None else env)
    if settings is None or _agent is not None:
        return _agent
    agent = Agent(settings)
    use_clock(agent.clock.now)  # this process's fault records: the job's timeline
    agent.start()
    _agent = agent
    _exit = RankExit(agent)
    _exit.install()
    _flush_on_sigterm()
    return agent


def current() -> Agent | None:
    """The agent of this process, if one runs."""
    return _agent


def set_current(agent: Agent | None) -> None:
    global _agent
    _agent = agent
