"""The in-process agent: recorder + hooks + writer, started and stopped as one."""

from __future__ import annotations

import atexit
import os
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from stepscope.agent._clock import Clock
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._import_hook import ImportHook
from stepscope.agent._recorder import new_recorder
from stepscope.agent._stepbuf import new_step_buffer
from stepscope.agent._writer import AgentWriter, Identity
from stepscope.agent.frameworks import Framework, frameworks
from stepscope.agent.tensors import TensorCapture, TensorWriter, resolve
from stepscope.store import Store, open_store

if TYPE_CHECKING:
    from stepscope.agent.profilers._profiling import AgentProfiling


@dataclass(frozen=True)
class AgentSettings:
    """Everything the agent needs, resolved once by the launcher or ``init()``."""

    job_url: str
    node: str = field(default_factory=socket.gethostname)
    rank: int = 0
    local_rank: int = 0
    flush_s: float = 2.0
    standalone: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    clock_offset_s: float = 0.0  # the node's offset against the job's reference clock
    clock_skew_s: float = 0.0  # tests only: a known error of this node's clock
    timeline_s: float | None = None  # the job clock's monotonic offset (_clock.Clock)
    native_hooks: bool = True  # the hooks' C fast path, where built (docs/design.md)


def _process_start_time() -> float | None:
    try:
        import psutil

        return float(psutil.Process().create_time())
    except Exception:
        return None


class Agent:
    """One per process. ``start()`` needs nothing but a writable job store."""

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        self.ident = Identity(settings.rank, settings.local_rank, settings.node, os.getpid())
        self.store: Store = open_store(settings.job_url).keep_root()
        self.clock = Clock(settings.clock_offset_s, settings.clock_skew_s, settings.timeline_s)
        ident, standalone = self.ident.as_dict(), settings.standalone
        self.faults = FaultBoundary(self.store, ident, standalone, wall=self.clock.now)
        self.writer = AgentWriter(
            self.store,
            self.ident,
            self.clock,
            self.faults,
            new_step_buffer(settings.native_hooks),
            settings.flush_s,
            heartbeat=settings.standalone,
        )
        self.recorder = new_recorder(self.writer.steps, settings.native_hooks)
        self.profiling = self._profiling()
        self.tensors = self._tensor_capture()
        self.frameworks: list[Framework] = frameworks(self)
        self._lock = threading.Lock()
        self._import_hooks: list[ImportHook] = []
        self.running = False

    def _profiling(self) -> AgentProfiling | None:
        """Profiling windows and live profiling requests (docs/profiling.md)."""
        try:
            from stepscope.agent.profilers._profiling import AgentProfiling

            return AgentProfiling(self)
        except Exception as exc:
            self.faults.record("profiling", exc)
            return None

    def _tensor_capture(self) -> TensorCapture | None:
        """The output tensor capture of the job's configuration (losses by default)."""
        try:
            rank, flush_s = self.settings.rank, self.writer.flush_s
            writer = TensorWriter(self.store, rank, self.faults, flush_s, self.clock.now)
            return TensorCapture(resolve(self.settings.config), writer, self.recorder, self.faults)
        except Exception as exc:
            self.faults.record("tensors", exc)
            return None

    def start(self) -> Agent:
        with self._lock:
            if self.running:
                return self
            started = _process_start_time()
            if started is not None:
                self.writer.event("process_start", started, argv=sys.argv)
            self.writer.event("agent_start", config=self.settings.config)
            self._start_threads()
            self.running = True
        atexit.register(self.stop)
        for fw in self.frameworks:  # attached now, or once the script imports it
            if fw.module in sys.modules:
                self.attach(fw)
            else:
                hook = ImportHook(self._attach_on_import(fw), fw.module)
                self._import_hooks.append(hook)
                hook.install()
        return self

    def _start_threads(self) -> None:
        """On a local folder the writer's thread also flushes the tensors and polls for
        profiling requests: one thread wakes, every 2 s (each wake-up costs the training
        thread a GIL handoff). On object storage each has its own thread: a call that
        waits out a store's retries must not hold back the others' writes."""
        if self.store.is_remote:
            if self.tensors is not None:
                self.tensors.writer.start()
            if self.profiling is not None:
                self.profiling.start(own_poll=True)
        else:
            if self.tensors is not None:
                self.writer.followers.append(self.tensors.writer.flush)
            if self.profiling is not None:
                self.profiling.start()
                self.writer.followers.append(self.profiling.poll)
        self.writer.start()

    def attach(self, fw: Framework) -> None:
        """Attach the adapter of a framework the script imported; record which."""
        if self.running and not fw.attached:
            try:
                detail = getattr(fw, "detail", None)  # Keras: its backend
                more = detail() if callable(detail) else {}
                self.writer.event("framework", name=fw.name, version=fw.version(), **more)
            except Exception as exc:
                self.faults.record("step-hooks", exc)
            fw.attach()

    def _attach_on_import(self, fw: Framework) -> Callable[[ModuleType], None]:
        return lambda _module: self.attach(fw)

    def framework(self, name: str) -> Framework | None:
        """The adapter of framework ``name`` ("torch"), attached or not."""
        return next((fw for fw in self.frameworks if fw.name == name), None)

    def step(self) -> None:
        """End the current training step now (for loops without an optimizer)."""
        import time

        self.recorder.end_train_step(time.perf_counter())

    def stop(self) -> None:
        """Remove every hook, write what is left. Idempotent."""
        with self._lock:
            if not self.running:
                return
            self.running = False
        atexit.unregister(self.stop)
        self.writer.ready_for_exit()  # before any writer's last flush (object stores)
        for hook in self._import_hooks:
            hook.uninstall()
        self._stop_tensors()
        if self.profiling is not None:
            self.profiling.stop()
        for fw in self.frameworks:
            if fw.attached:
                fw.detach()
        self.writer.event(
            "agent_stop",
            steps=self.recorder.train_steps,
            eval_steps=self.recorder.eval_steps,
            dropped_rows=self.writer.dropped_rows,
        )
        self.writer.stop()

    def _stop_tensors(self) -> None:
        if self.tensors is None:
            return
        try:
            self.tensors.remove()
        except Exception as exc:
            self.faults.record("tensors", exc)
        self.tensors.writer.stop()
