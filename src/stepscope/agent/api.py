"""The explicit API, for scripts that want stepscope without ``stepscope run``.

```python
import stepscope
with stepscope.init(output="runs", job="exp-1"):
    train()          # steps are found by the same hooks as under `stepscope run`
```
Inside ``stepscope run`` these calls reuse the running agent. A job that is never
closed (``init()`` without ``with`` or :func:`shutdown`) is ended when the process
exits: ``Completed``, or ``Failed`` after an uncaught exception or a non-zero
``sys.exit``, with the rank's record (``ranks/rank-0.json``) as under ``stepscope run``.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
import time
from typing import TYPE_CHECKING

from stepscope.agent import bootstrap
from stepscope.agent._agent import Agent, AgentSettings
from stepscope.agent._rank_exit import RankExit
from stepscope.config import missing_rule_inputs
from stepscope.jobfolder import JobMeta, update_meta, use_clock, write_meta
from stepscope.store import open_store

if TYPE_CHECKING:
    from stepscope.config import StepscopeConfig


class _Session:
    """Returned by :func:`init`; a context manager that ends the job on exit."""

    def __init__(self, agent: Agent, owns_job: bool) -> None:
        self.agent, self.owns_job = agent, owns_job

    @property
    def path(self) -> str:
        return self.agent.store.url

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        shutdown(failed=exc_type is not None)


def _default_job_name() -> str:
    script = os.path.splitext(os.path.basename(sys.argv[0] or "python"))[0] or "python"
    return f"{script}-{time.strftime('%Y%m%d-%H%M%S')}"


def init(
    output: str | None = None, job: str | None = None, config: StepscopeConfig | None = None
) -> _Session:
    """Start the agent in this process (or return the one ``stepscope run`` started).

    ``config`` is a :class:`stepscope.config.StepscopeConfig` or ``None``; ``output``
    and ``job`` given here win over its ``[job]`` (default folder ./stepscope-runs).
    """
    running = bootstrap.current()
    if running is not None:
        return _Session(running, owns_job=False)
    if config is not None:
        output = output or config.job.output
        job = job or config.job.name
    output = output or "./stepscope-runs"
    name = job or _default_job_name()
    url = f"{output.rstrip('/')}/{name}"
    meta = JobMeta.new(
        name, sys.argv, config.to_dict() if config is not None else {}, [socket.gethostname()]
    )
    if warnings := missing_rule_inputs(meta.config):  # rules that could judge nothing
        meta.extra["config_warnings"] = warnings
        for warning in warnings:
            print(f"stepscope: warning: {warning}", file=sys.stderr, flush=True)
    write_meta(open_store(url), meta)
    native = bootstrap.native_hooks_from_env()  # the agent reads the environment there
    settings = AgentSettings(
        url,
        standalone=True,
        config=meta.config,
        native_hooks=native,
        timeline_s=meta.monotonic_offset_s,
    )  # job.json's clock: one clock
    agent = Agent(settings)
    use_clock(agent.clock.now)  # this process's fault records: the job's timeline
    bootstrap.set_current(agent.start())
    global _exit
    _exit = RankExit(agent)  # notes an uncaught exception or sys.exit(n) for the end
    _exit.install()
    atexit.register(_end_at_exit)  # after the agent's own atexit: handlers run last-first
    return _Session(agent, owns_job=True)


_exit: RankExit | None = None


def _end_at_exit() -> None:
    """End a job ``init()`` opened and nothing closed, as the interpreter exits."""
    code = _exit.exit_code if _exit is not None else 0
    shutdown(failed=code != 0, exit_code=code)


def step() -> None:
    """Mark the end of a training step (only needed for loops without an optimizer)."""
    agent = bootstrap.current()
    if agent is not None:
        agent.step()


def shutdown(failed: bool = False, exit_code: int | None = None) -> None:
    """Stop the agent started by :func:`init` and record how the job ended."""
    global _exit
    agent = bootstrap.current()
    if agent is None or not agent.settings.standalone:
        return
    atexit.unregister(_end_at_exit)
    agent.stop()
    bootstrap.set_current(None)
    code = exit_code if exit_code is not None else 1 if failed else 0
    if _exit is not None:  # the rank's record, as a process under `stepscope run` leaves
        _exit.uninstall()
        if not _exit.ended:  # else its excepthook wrote Failed, with the error
            _exit.exit_code = code
            _exit.end("Failed" if failed else "Exited")
        _exit = None
    status = "Failed" if failed else "Completed"
    end = agent.clock.now()  # the agent's times' clock: a wall-clock step moves no end
    update_meta(agent.store, status=status, end_time=end, exit_code=code)
