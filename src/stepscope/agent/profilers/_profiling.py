"""An agent's profiling: planned windows, live requests, and the background thread.

One :class:`AgentProfiling` per agent. It reads the windows of the job's
configuration, drives the :class:`WindowScheduler` from the step boundaries,
and polls the job's ``control/`` folder for ``profile`` requests off the
training thread: at each flush of the agent's writer (every 2 s) on a local
folder, on its background thread (every 10 s) on object storage.
Every rank applies every request; only rank 0 acknowledges it
(``control/ack/``), so there is one answer per request.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from stepscope.agent._windows import WindowScheduler
from stepscope.agent.profilers._background import Background
from stepscope.agent.profilers._sink import ArtifactSink, FileBounds
from stepscope.config import ProfilingWindow, StepscopeConfig
from stepscope.errors import RequestError
from stepscope.jobfolder import Planned, control, parse_request

if TYPE_CHECKING:
    from stepscope.agent._agent import Agent


def plan_from_config(config: Mapping[str, Any]) -> tuple[list[Planned], FileBounds]:
    """The windows of a job's resolved configuration (``StepscopeConfig.to_dict()``)."""
    if not config:
        return [], FileBounds()
    with warnings.catch_warnings():  # the launcher already warned about costly windows
        warnings.simplefilter("ignore")
        profiler = StepscopeConfig.from_dict(config).profiler
    profile = profiler.framework_profile_params
    bounds = FileBounds.from_profile(profile)
    plan = [Planned(w) for w in profile.windows()] if profile is not None else []
    if profiler.profile_params is not None:
        # A deep profile runs for a duration, chunk after chunk: without the shapes'
        # cost (a window's steps take up to ~1.7x as long with them, docs/profiling.md)
        seconds = profiler.profile_params.cpu_profiling_duration
        deep = ProfilingWindow("detailed", duration=seconds, record_shapes=False)
        plan.append(Planned(deep, label="deep", rotate_s=bounds.file_close_interval))
    return plan, bounds


class AgentProfiling:
    """Built by the agent; ``start``, ``attach`` (torch imported) and ``stop``."""

    def __init__(self, agent: Agent) -> None:
        self.store, self.rank, self.faults = agent.store, agent.settings.rank, agent.faults
        self.event = agent.writer.event
        plan, bounds = plan_from_config(agent.settings.config)
        self.sink = ArtifactSink(self.store, self.rank, bounds, self.faults)
        clock = agent.clock
        self.now = clock.now  # live time windows start on the job's clock, as they are judged
        self.scheduler = WindowScheduler(
            plan, agent.recorder, self.sink, self.event, clock.now, clock.wall, self.faults
        )
        self.background = Background(self._fault)
        self.scheduler.submit = self.background.submit
        if self.rank == 0:
            self.scheduler.ack = self._acknowledge
        self._requests = control.Requests(self.store, "profile", on_reject=self._rejected)
        self._polling = False  # from start() to stop()
        agent.recorder.listen(self.scheduler.on_boundary)

    def start(self, own_poll: bool = False) -> None:
        """Start the background thread; with ``own_poll`` it also calls ``poll`` every
        second (at least the store's interval), else the agent's writer does."""
        if own_poll:
            self.background.poll_every(self.poll, max(1.0, self.store.min_interval_s))
        self.background.start()
        self._polling = True

    def attach(self) -> None:
        self.scheduler.attach()

    def stop(self) -> None:
        """Close open windows, finish their exports, remove the staging folder."""
        self._polling = False  # a request seen later would never be applied
        self.scheduler.stop()
        self.background.stop()
        self.sink.close()

    def _fault(self, exc: Exception) -> None:
        self.faults.record("profiling", exc)

    def _acknowledge(self, name: str, accepted: bool, detail: str) -> None:
        control.acknowledge(self.store, name, accepted, detail)

    def _rejected(self, name: str, detail: str) -> None:
        """An unreadable request file (acknowledged and recorded by ``control``)."""
        self.event("profiling_request", request=name, accepted=False, detail=detail)

    def poll(self) -> None:
        """Take new ``profile`` requests (the writer's thread, after each flush)."""
        if not self._polling:
            return
        try:
            self._poll()
        except Exception as exc:
            self._fault(exc)

    def _poll(self) -> None:
        """New ``profile`` requests, validated here and applied at a step boundary."""
        for name, body in self._requests.pending():
            try:
                request = parse_request(name, body, self.now())
            except Exception as exc:  # one bad request never costs the others
                detail = (
                    str(exc) if isinstance(exc, RequestError) else f"{type(exc).__name__}: {exc}"
                )
                self.event("profiling_request", request=name, accepted=False, detail=detail)
                if self.rank == 0:
                    self.faults.call("control", self._acknowledge, name, False, detail)
                continue
            self.scheduler.request(request)
