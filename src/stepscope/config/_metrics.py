"""What the framework profiling options share (:class:`MetricsConfigBase`): a step
range or a time range, the windows they resolve to, and their dict round trip; the
four options themselves are in ``_profiling_options``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Self

from stepscope.config._base import (
    as_bool,
    build,
    check_keys,
    field_names,
    fields_to_dict,
    given,
)
from stepscope.config._ranges import StepRange, TimeRange
from stepscope.config._window import (
    ProfilingWindow,
    WindowKind,
    WindowOptions,
)
from stepscope.errors import ConfigError

SECTION = "profiler.framework_profile_params"


def check_range_conflict(owner: str, steps: StepRange, times: TimeRange) -> None:
    """Refuse a step range and a time range on the same object (the seed's conflict)."""
    step_set = {k: v for k, v in steps.to_dict().items() if v is not None}
    time_set = {k: v for k, v in times.to_dict().items() if v is not None}
    if step_set and time_set:
        shown = ", ".join(f"{k}={v!r}" for k, v in {**step_set, **time_set}.items())
        raise ConfigError(
            f"{owner} sets both a step range and a time range ({shown}); they conflict. "
            "Accepted: start_step/num_steps, or start_unix_time/duration. "
            "Fix: remove one of the two pairs."
        )


@dataclass(frozen=True)
class MetricsConfigBase:
    """What the three profiling options share: a step range or a time range.

    Give ``start_step``/``num_steps`` (steps are numbered from 0; a missing start is
    step 0 and a missing count is one step) or ``start_unix_time``/``duration``, not
    both. With neither, the option's default window applies, whatever
    ``profile_default_steps`` says; with a range, ``profile_default_steps`` is ignored.
    """

    start_step: int | None = None
    num_steps: int | None = None
    start_unix_time: float | None = None
    duration: float | None = None
    profile_default_steps: bool = False

    kind: ClassVar[WindowKind]
    default_start_step: ClassVar[int]
    default_num_steps: ClassVar[int] = 1

    def __post_init__(self) -> None:
        steps = StepRange(self.start_step, self.num_steps)
        times = TimeRange(self.start_unix_time, self.duration)
        check_range_conflict(type(self).__name__, steps, times)
        for name, value in {**steps.to_dict(), **times.to_dict()}.items():
            object.__setattr__(self, name, value)
        default = as_bool(self.profile_default_steps, "profile_default_steps")
        object.__setattr__(self, "profile_default_steps", default)

    @property
    def has_range(self) -> bool:
        """Whether a step or time range was given (else the default window applies)."""
        ranges = (self.start_step, self.num_steps, self.start_unix_time, self.duration)
        return any(value is not None for value in ranges)

    @property
    def range(self) -> StepRange | TimeRange:
        """The range this option profiles, with defaults filled in."""
        if self.start_unix_time is not None or self.duration is not None:
            return TimeRange(self.start_unix_time, self.duration)
        if not self.has_range:
            return StepRange(self.default_start_step, self.default_num_steps)
        return StepRange(self.start_step, self.num_steps).resolved()

    def windows(self) -> list[ProfilingWindow]:
        """The resolved windows of this option (one, except for the default Python ones)."""
        span = self.range  # one call per kind of range: each to_dict() is its own TypedDict
        if isinstance(span, TimeRange):
            return [ProfilingWindow(kind=self.kind, **span.to_dict(), **self._options())]
        return [ProfilingWindow(kind=self.kind, **span.to_dict(), **self._options())]

    def _options(self) -> WindowOptions:
        return {}

    def to_dict(self) -> dict[str, object]:
        """The option as a JSON-serialisable dict (``from_dict`` reads it back)."""
        return fields_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, section: str | None = None) -> Self:
        """The option from a dict of its parameters (strings like ``"5"`` are accepted)."""
        section = section or f"{SECTION}.{cls.kind}_profiling_config"
        return build(cls, given(check_keys(data, field_names(cls), section)), section)
