"""The framework profiling options: detailed, dataloader, Python and CUDA memory
profiling, each a :class:`MetricsConfigBase` with its own parameters and default window."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from stepscope.config._base import as_bool, as_int, invalid
from stepscope.config._metrics import MetricsConfigBase
from stepscope.config._ranges import PythonProfiler, as_enum, cProfileTimer
from stepscope.config._window import (
    DEFAULT_MAX_ENTRIES,
    ProfilingWindow,
    WindowKind,
    WindowOptions,
)


@dataclass(frozen=True)
class DetailedProfilingConfig(MetricsConfigBase):
    """Detailed profiling with the PyTorch profiler; by default step 5, for one step.

    ``record_shapes`` (on by default: the operators' efficiency needs the shapes),
    ``profile_memory`` and ``with_stack`` are passed to ``torch.profiler.profile``;
    ``include_prestep`` also traces the step before the window (normally run only to
    warm the profiler up).
    """

    record_shapes: bool = True  # for the efficiency (docs/profiling.md)
    profile_memory: bool = False
    with_stack: bool = False
    include_prestep: bool = False

    kind: ClassVar[WindowKind] = "detailed"
    default_start_step: ClassVar[int] = 5
    _FLAGS: ClassVar[tuple[str, ...]] = (
        "record_shapes",
        "profile_memory",
        "with_stack",
        "include_prestep",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in self._FLAGS:
            object.__setattr__(self, name, as_bool(getattr(self, name), name))

    def _options(self) -> WindowOptions:
        return {
            "record_shapes": self.record_shapes,
            "profile_memory": self.profile_memory,
            "with_stack": self.with_stack,
            "include_prestep": self.include_prestep,
        }


@dataclass(frozen=True)
class DataloaderProfilingConfig(MetricsConfigBase):
    """Data loader profiling; by default step 7, for one step.

    ``metrics_regex`` selects the data loader metrics to record (``re.search`` on
    their names); it must be a valid Python regular expression.
    """

    metrics_regex: str = ".*"

    kind: ClassVar[WindowKind] = "dataloader"
    default_start_step: ClassVar[int] = 7

    def __post_init__(self) -> None:
        super().__post_init__()
        accepted = "Python regular expressions, e.g. '.*' for every metric"
        if not isinstance(self.metrics_regex, str):
            raise invalid(self.metrics_regex, "metrics_regex", accepted)
        try:
            re.compile(self.metrics_regex)
        except re.error as error:
            raise invalid(
                self.metrics_regex,
                "metrics_regex",
                accepted,
                f"It does not compile ({error}); escape special characters with a backslash.",
            ) from None

    def _options(self) -> WindowOptions:
        return {"metrics_regex": self.metrics_regex}


@dataclass(frozen=True)
class PythonProfilingConfig(MetricsConfigBase):
    """Python profiling with cProfile or Pyinstrument; by default steps 9, 10 and 11.

    The default window (no range given) with cProfile and the default timer, or
    with ``profile_default_steps=True``, profiles step 9 with the ``total_time``
    timer, step 10 with ``cpu_time`` and step 11 with ``off_cpu_time``.
    ``cprofile_timer`` is ignored with Pyinstrument.
    """

    python_profiler: PythonProfiler = PythonProfiler.CPROFILE
    cprofile_timer: cProfileTimer = cProfileTimer.TOTAL_TIME

    kind: ClassVar[WindowKind] = "python"
    default_start_step: ClassVar[int] = 9
    default_num_steps: ClassVar[int] = 3

    def __post_init__(self) -> None:
        super().__post_init__()
        profiler = as_enum(PythonProfiler, self.python_profiler, "python_profiler")
        object.__setattr__(self, "python_profiler", profiler)
        timer = as_enum(cProfileTimer, self.cprofile_timer, "cprofile_timer")
        object.__setattr__(self, "cprofile_timer", timer)

    @property
    def rotates_timers(self) -> bool:
        """Whether the default window profiles its three steps with the three timers."""
        return (
            not self.has_range
            and self.python_profiler is PythonProfiler.CPROFILE
            and (self.profile_default_steps or self.cprofile_timer is cProfileTimer.TOTAL_TIME)
        )

    def windows(self) -> list[ProfilingWindow]:
        """The resolved windows: three one-step windows when the timers rotate."""
        if not self.rotates_timers:
            return super().windows()
        return [
            ProfilingWindow(
                kind="python",
                start_step=self.default_start_step + i,
                num_steps=1,
                python_profiler=PythonProfiler.CPROFILE,
                cprofile_timer=timer,
            )
            for i, timer in enumerate(cProfileTimer)
        ]

    def _options(self) -> WindowOptions:
        cprofile = self.python_profiler is PythonProfiler.CPROFILE
        return {
            "python_profiler": self.python_profiler,
            "cprofile_timer": self.cprofile_timer if cprofile else None,
        }


@dataclass(frozen=True)
class MemoryProfilingConfig(MetricsConfigBase):
    """CUDA memory history: every allocation and free of the caching allocator, with
    its stack, for the window's steps; by default step 5, for one step. Never on by
    default: it runs only where the configuration names it (docs/profiling.md).

    ``max_entries`` bounds the events kept (``torch.cuda.memory._record_memory_history``).
    """

    max_entries: int = DEFAULT_MAX_ENTRIES

    kind: ClassVar[WindowKind] = "memory"
    default_start_step: ClassVar[int] = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "max_entries", as_int(self.max_entries, "max_entries", 1))

    def _options(self) -> WindowOptions:
        return {"max_entries": self.max_entries}
