"""Profiling windows: open and close the profilers at step boundaries.

The scheduler runs on the training thread, called by the ``StepRecorder``'s listeners
after every step (and once when the agent attaches to torch, before the first
step). Outside windows it returns at its first line. A window opens at the
boundary before its first step and closes at the boundary after its last one;
time windows open and close at the first boundary past their start and end.
Steps inside a window, the step after it (which pays for stopping the
profiler) and the steps during which its export still runs on the background
thread are marked ``profiled``; no step after the export ends is (the export's end
pokes the recorder, and the next boundary takes the mark off). Live requests
(profilers/_live.py) arrive in an inbox and are applied here, at the next boundary.
The rules of a window's timing are in :mod:`._window_state`; the start and stop of its
profiler, and its export, in :mod:`._window_switch`. See docs/profiling.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from stepscope.agent import _window_state as state
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import EVERY_STEP, NEVER, StepRecorder
from stepscope.agent._window_state import Active
from stepscope.agent._window_switch import ProfilerSwitch
from stepscope.agent.profilers import ArtifactSink
from stepscope.agent.profilers import make_profiler as _make_profiler
from stepscope.jobfolder import LiveRequest, Planned, describe

Ack = Callable[[str, bool, str], None]


class WindowScheduler:
    """Runs the planned and requested windows of one rank."""

    def __init__(
        self,
        plan: list[Planned],
        recorder: StepRecorder,
        sink: ArtifactSink,
        event: Callable[..., None],
        now: Callable[[], float],
        wall: Callable[[float], float],
        faults: FaultBoundary,
    ) -> None:
        self.plan, self.rec, self.sink = plan, recorder, sink
        self.event, self.now, self.wall, self.faults = event, now, wall, faults
        self.active: list[Active] = []
        self.inbox: deque[LiveRequest] = deque()
        self.ack: Ack | None = None
        self._tail = False
        self.switch = ProfilerSwitch(recorder, sink, self._emit, faults)

    @property
    def submit(self) -> Callable[[Callable[[], None]], None]:
        """Where exports and acknowledgements run (the agent's background thread)."""
        return self.switch.submit

    @submit.setter
    def submit(self, submit: Callable[[Callable[[], None]], None]) -> None:
        self.switch.submit = submit

    # -- called by the agent ------------------------------------------------------------
    def on_boundary(self, phase: str, step: int, _t: float) -> tuple[int, int]:
        """After a step (training thread); returns when the recorder calls again.

        Idle (nothing planned, open or asked for), it asks for no boundary: a live
        request pokes the recorder when it arrives (``AgentProfiling``), and so does
        the end of an export (``_finish``). The steps after the last export are not
        ``profiled``: a mark left on would hide every later step from the rules.
        """
        if not (self.plan or self.active or self.inbox or self._tail):
            # Only an export left, or nothing: no call per step until the export pokes.
            self.rec.profiled = self.switch.exporting > 0
            return NEVER
        train = phase == "train"
        self.switch.guarded(
            lambda: self._advance(step + 1 if train else self.rec.train_steps, train)
        )
        return EVERY_STEP

    def request(self, request: LiveRequest) -> None:
        """A live request (any thread): applied at the next step boundary."""
        self.inbox.append(request)
        self.rec.poke = True  # after the append: the boundary that sees the poke sees it

    def attach(self) -> None:
        """Before the first step (torch was just imported): windows that start at once."""
        self.switch.safe = True  # not inside optimizer.step(): the profiler may start here
        try:
            self.switch.guarded(lambda: self._advance(self.rec.train_steps, False))
        finally:
            self.switch.safe = False

    def stop(self) -> None:
        """Close every open window (at exit); planned windows that never ran are dropped."""
        self.switch.safe = True
        self.rec.deferred = None
        self.switch.run_deferred()
        while self.active:
            active = self.active[0]
            try:
                self._close(active, self.rec.train_steps)
            except Exception as exc:
                self.faults.record("profiling", exc)
                if active in self.active:
                    self.active.remove(active)
        self.rec.profiled = False

    # -- the state machine ------------------------------------------------------------
    def _emit(self, name: str, **detail: object) -> None:
        """An event of the rank; the window's kind is ``profile_kind`` (``kind`` is the event's)."""
        if "kind" in detail:
            detail["profile_kind"] = detail.pop("kind")
        self.event(name, **detail)

    def _advance(self, nxt: int, train: bool) -> None:
        now = self.now()
        if train:
            for active in self.active:
                active.steps += 1
        closed = self._take_inbox(nxt)
        for active in list(self.active):
            if state.ended(active, nxt, now):
                self._close(active, nxt)
                closed = True
                if (chunk := state.next_chunk(active, now)) is not None:
                    self.plan.append(chunk)
        for planned in list(self.plan):
            self._consider(planned, nxt, now)
        self._tail = closed
        # The export competes with training for the interpreter: steps it slows are marked.
        self.rec.profiled = bool(self.active) or closed or self.switch.exporting > 0

    def _take_inbox(self, nxt: int) -> bool:
        closed = False
        while self.inbox:
            closed = self._apply(self.inbox.popleft(), nxt) or closed
        return closed

    def _apply(self, req: LiveRequest, nxt: int) -> bool:
        """Apply one live request; True if it closed an open window."""
        now = self.now()
        windows = [state.resolve(p, nxt, now) for p in req.windows]
        refused = state.refusal(windows, nxt, now)
        if refused is not None:
            self._acknowledge(req.name, False, refused)
            return False
        closing = [a for a in self.active if a.planned.label in req.off]
        for active in closing:
            self._close(active, nxt)
        self.plan = [p for p in self.plan if p.label not in req.off] + windows
        done = [f"planned {describe(p)}" for p in windows]
        if req.off:
            done.append(f"switched off {', '.join(req.off)} ({len(closing)} open window(s) closed)")
        self._acknowledge(req.name, True, "; ".join(done))
        return bool(closing)

    def _acknowledge(self, name: str, accepted: bool, detail: str) -> None:
        self._emit("profiling_request", request=name, accepted=accepted, detail=detail)
        ack = self.ack
        if ack is not None:
            self.submit(lambda: ack(name, accepted, detail))

    def _consider(self, p: Planned, nxt: int, now: float) -> None:
        w = p.window
        missed, due = state.missed_or_due(w, nxt, now)
        if missed:
            self.plan.remove(p)
            self._emit(
                "profiling_missed",
                kind=p.label,
                window=w.to_dict(),
                request=p.request,
                reason=f"the window had passed when it was considered (step {nxt})",
            )
        elif due:
            self.plan.remove(p)
            self._open(p, nxt, now)

    def _open(self, p: Planned, nxt: int, now: float) -> None:
        reason = state.conflict(p, self.active, self.sink.disabled)  # before the profiler starts
        shown = p.window.to_dict()
        if reason is None:
            profiler = _make_profiler(p.window, self.rec, self.wall, self.sink)
            reason = self.switch.start(profiler, p.window.kind == "detailed")
        if reason is not None:
            self._emit(
                "profiling_skipped", kind=p.label, window=shown, request=p.request, reason=reason
            )
            return
        self.active.append(Active(p, profiler, nxt, now))
        self._emit("profiling_start", kind=p.label, window=shown, first_step=nxt, request=p.request)

    def _close(self, a: Active, nxt: int) -> None:
        self.active.remove(a)
        last = max(nxt - 1, a.first_step)
        base = self.sink.base(a.planned.label, a.first_step, last)
        record = state.window_record(a, self.sink.rank, last, self.now())
        self.switch.stop(a.profiler, a.planned.window.kind == "detailed", base, record)
