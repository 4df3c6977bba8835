"""ProfilingWindow: one resolved window of framework profiling, as the agent runs it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypedDict, get_args

from stepscope.config._base import (
    Json,
    as_bool,
    as_int,
    build,
    check_keys,
    field_names,
    given,
    invalid,
)
from stepscope.config._ranges import PythonProfiler, StepRange, TimeRange, as_enum, cProfileTimer
from stepscope.errors import ConfigError

WindowKind = Literal["detailed", "dataloader", "python", "memory"]
WINDOW_KINDS: tuple[WindowKind, ...] = get_args(WindowKind)


class WindowOptions(TypedDict, total=False):
    """The options of a window's kind (:class:`ProfilingWindow`'s fields beside its span)."""

    python_profiler: PythonProfiler | None
    cprofile_timer: cProfileTimer | None
    metrics_regex: str | None
    record_shapes: bool
    profile_memory: bool
    with_stack: bool
    include_prestep: bool
    max_entries: int


#: The allocator events a memory window keeps by default (PyTorch's own default).
DEFAULT_MAX_ENTRIES = 100_000


@dataclass(frozen=True)
class ProfilingWindow:
    """One window of one kind of framework profiling, with every default resolved.

    A window is either a step window (``start_step`` and ``num_steps`` set, the time
    fields None) or a time window (``start_unix_time`` and/or ``duration`` set).
    In a time window a None ``start_unix_time`` means "from the start of training"
    and a None ``duration`` means "for one step" (the seed's semantics).

    Only the fields of the window's ``kind`` are set: ``python_profiler`` and
    ``cprofile_timer`` (None with Pyinstrument) for ``"python"``, ``metrics_regex``
    for ``"dataloader"``, the PyTorch profiler options for ``"detailed"``, and
    ``max_entries`` (the allocator events kept, newest last) for ``"memory"``.
    """

    kind: WindowKind
    start_step: int | None = None
    num_steps: int | None = None
    start_unix_time: float | None = None
    duration: float | None = None
    python_profiler: PythonProfiler | None = None
    cprofile_timer: cProfileTimer | None = None
    metrics_regex: str | None = None
    # on: the efficiency of a window's operators needs their shapes; the cost stays
    # inside the window's steps (docs/profiling.md, "Efficiency against the hardware")
    record_shapes: bool = True
    profile_memory: bool = False
    with_stack: bool = False
    include_prestep: bool = False
    max_entries: int = DEFAULT_MAX_ENTRIES

    def __post_init__(self) -> None:
        if self.kind not in WINDOW_KINDS:
            raise invalid(self.kind, "kind", ", ".join(map(repr, WINDOW_KINDS)))
        object.__setattr__(self, "max_entries", as_int(self.max_entries, "max_entries", 1))
        steps = StepRange(self.start_step, self.num_steps)
        times = TimeRange(self.start_unix_time, self.duration)
        if self.is_time_window:
            if self.start_step is not None or self.num_steps is not None:
                raise ConfigError("A profiling window is either a step window or a time window.")
        else:
            steps = steps.resolved()
        for name, value in {**steps.to_dict(), **times.to_dict()}.items():
            object.__setattr__(self, name, value)
        for name in ("record_shapes", "profile_memory", "with_stack", "include_prestep"):
            object.__setattr__(self, name, as_bool(getattr(self, name), name))
        if self.python_profiler is not None:
            profiler = as_enum(PythonProfiler, self.python_profiler, "python_profiler")
            object.__setattr__(self, "python_profiler", profiler)
        if self.cprofile_timer is not None:
            timer = as_enum(cProfileTimer, self.cprofile_timer, "cprofile_timer")
            object.__setattr__(self, "cprofile_timer", timer)

    @property
    def is_time_window(self) -> bool:
        """True for a time window, False for a step window."""
        return self.start_unix_time is not None or self.duration is not None

    @property
    def end_step(self) -> int | None:
        """The first step after a step window (None for a time window)."""
        if self.start_step is None or self.num_steps is None:
            return None
        return self.start_step + self.num_steps

    def covers_step(self, step: int) -> bool:
        """Whether ``step`` is inside this step window (always False for a time window)."""
        end = self.end_step
        return end is not None and self.start_step is not None and self.start_step <= step < end

    def to_dict(self) -> dict[str, Json]:
        """The window as a JSON-serialisable dict (``from_dict`` reads it back): its
        fields in order, the enums by value."""
        python, timer = self.python_profiler, self.cprofile_timer
        return {
            "kind": self.kind,
            "start_step": self.start_step,
            "num_steps": self.num_steps,
            "start_unix_time": self.start_unix_time,
            "duration": self.duration,
            "python_profiler": python.value if python is not None else None,
            "cprofile_timer": timer.value if timer is not None else None,
            "metrics_regex": self.metrics_regex,
            "record_shapes": self.record_shapes,
            "profile_memory": self.profile_memory,
            "with_stack": self.with_stack,
            "include_prestep": self.include_prestep,
            "max_entries": self.max_entries,
        }

    @classmethod
    def from_dict(
        cls, data: Mapping[str, object], *, section: str = "ProfilingWindow"
    ) -> ProfilingWindow:
        """A ProfilingWindow from the dict :meth:`to_dict` gives."""
        kwargs = given(check_keys(data, field_names(cls), section))
        if "kind" not in kwargs:
            kinds = ", ".join(map(repr, WINDOW_KINDS))
            raise ConfigError(f"Missing key 'kind'. Accepted values are {kinds}.", f"[{section}]")
        return build(cls, kwargs, section)


@dataclass(frozen=True)
class WindowLimit:
    """The longest window of one kind that a live request or the configuration may open."""

    steps: int
    seconds: float


#: The longest window of each kind, live or planned (docs/profiling.md, "Limits"). A profiler's
#: cost grows with its window: the PyTorch profiler keeps every event in memory until
#: the window closes, pyinstrument one sample a millisecond, the data loader one record
#: a batch; cProfile only one entry per function.
LIVE_WINDOW_LIMITS: dict[str, WindowLimit] = {
    "detailed": WindowLimit(steps=200, seconds=300.0),
    "python (cprofile)": WindowLimit(steps=100_000, seconds=3600.0),
    "python (pyinstrument)": WindowLimit(steps=2_000, seconds=600.0),
    "dataloader": WindowLimit(steps=10_000, seconds=3600.0),
    # every allocation and free of the window is kept (up to max_entries) with its stack
    "memory": WindowLimit(steps=200, seconds=300.0),
}
#: The furthest a live step window may start: later steps are never reached.
MAX_START_STEP = 10**12


def live_limit(window: ProfilingWindow) -> tuple[str, WindowLimit]:
    """The name of ``window``'s kind in :data:`LIVE_WINDOW_LIMITS`, and its limit."""
    name: str = window.kind
    if window.kind == "python":
        profiler = window.python_profiler or PythonProfiler.CPROFILE
        name = f"python ({profiler.value})"
    return name, LIVE_WINDOW_LIMITS[name]


def check_live_limits(window: ProfilingWindow, planned: bool = False) -> None:
    """Raise ConfigError if ``window`` is longer than its kind's limit: a live one
    (a request), or ``planned`` in the configuration (the same limits)."""
    name, limit = live_limit(window)
    what = f"A {'planned' if planned else 'live'} {name} window"
    fix = (
        "plan a shorter window, or several"
        if planned
        else "profile less, or ask for another window later"
    )
    if window.num_steps is not None and window.num_steps > limit.steps:
        raise ConfigError(
            f"{what} of {_count(window.num_steps)} steps is over the limit of "
            f"{limit.steps:,} steps (num_steps 1 to {limit.steps:,}): {fix} "
            f"(e.g. num_steps={min(limit.steps, 5)})."
        )
    if window.duration is not None and window.duration > limit.seconds:
        raise ConfigError(
            f"{what} of {window.duration:.3g} s is over the limit of {limit.seconds:g} s "
            f"(duration up to {limit.seconds:g}): {fix} "
            f"(e.g. duration={min(limit.seconds, 5.0):g})."
        )
    if window.start_step is not None and window.start_step > MAX_START_STEP:
        raise ConfigError(
            f"start_step {_count(window.start_step)} is past the last step a job can reach "
            f"({MAX_START_STEP:.0e}); give a step of this job, e.g. start_step=100."
        )


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**9 else f"{n:.3g}"
