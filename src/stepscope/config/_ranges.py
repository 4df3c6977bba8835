"""Profiling ranges (a step range or a time range) and the Python profiler choices."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TypedDict, TypeVar

from stepscope.config._base import as_float, as_int, build, check_keys, given, invalid

E = TypeVar("E", bound=Enum)

START_STEP_FIX = "Steps are numbered from 0, e.g. start_step=5."
NUM_STEPS_FIX = "Profile at least one step, e.g. num_steps=1."
START_TIME_FIX = "Give seconds since 1970-01-01 UTC, e.g. time.time() + 60."
DURATION_FIX = "Give the number of seconds to profile, e.g. duration=5."


class StepSpan(TypedDict):
    """A :class:`StepRange` as a dict (None: not given)."""

    start_step: int | None
    num_steps: int | None


class TimeSpan(TypedDict):
    """A :class:`TimeRange` as a dict (None: not given)."""

    start_unix_time: float | None
    duration: float | None


class _CaseInsensitiveEnum(Enum):
    """Accepts any case, and a pasted ``"PythonProfiler.CPROFILE"``, by value or name."""

    @classmethod
    def _missing_(cls, value: object) -> _CaseInsensitiveEnum | None:
        if isinstance(value, str):
            key = value.strip().rsplit(".", 1)[-1].lower()
            for member in cls:
                if key in (member.value, member.name.lower()):
                    return member
        return None


class PythonProfiler(_CaseInsensitiveEnum):
    """The Python profiler used by Python profiling windows."""

    CPROFILE = "cprofile"
    PYINSTRUMENT = "pyinstrument"


class cProfileTimer(_CaseInsensitiveEnum):  # the seed's name
    """The timer cProfile measures with (ignored by Pyinstrument)."""

    TOTAL_TIME = "total_time"
    CPU_TIME = "cpu_time"
    OFF_CPU_TIME = "off_cpu_time"


def as_enum(enum: type[E], value: object, name: str) -> E:
    """``value`` (a member or a string in any case) as a member of ``enum``."""
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in enum)
        raise invalid(value, name, f"{choices} (in any case)") from None


@dataclass(frozen=True)
class StepRange:
    """Steps ``start_step`` to ``start_step + num_steps - 1`` (steps are numbered from 0).

    As in the seed, a missing ``start_step`` means step 0 and a missing ``num_steps``
    means one step; :meth:`resolved` fills them in.
    """

    start_step: int | None = None
    num_steps: int | None = None

    def __post_init__(self) -> None:
        if self.start_step is not None:
            start = as_int(self.start_step, "start_step", 0, START_STEP_FIX)
            object.__setattr__(self, "start_step", start)
        if self.num_steps is not None:
            num = as_int(self.num_steps, "num_steps", 1, NUM_STEPS_FIX)
            object.__setattr__(self, "num_steps", num)

    def resolved(self) -> StepRange:
        """This range with the seed's defaults filled in (start at step 0, one step)."""
        return StepRange(
            0 if self.start_step is None else self.start_step,
            1 if self.num_steps is None else self.num_steps,
        )

    def to_dict(self) -> StepSpan:
        """The range as a JSON-serialisable dict (``from_dict`` reads it back)."""
        return {"start_step": self.start_step, "num_steps": self.num_steps}

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, section: str = "StepRange") -> StepRange:
        """A StepRange from ``{"start_step": ..., "num_steps": ...}``."""
        return build(cls, given(check_keys(data, ("start_step", "num_steps"), section)), section)


@dataclass(frozen=True)
class TimeRange:
    """``duration`` seconds from ``start_unix_time`` (unix seconds).

    As in the seed, a missing ``start_unix_time`` means "from the start of training"
    and a missing ``duration`` means one step.
    """

    start_unix_time: float | None = None
    duration: float | None = None

    def __post_init__(self) -> None:
        if self.start_unix_time is not None:
            start = as_float(
                self.start_unix_time, "start_unix_time", positive=False, fix=START_TIME_FIX
            )
            object.__setattr__(self, "start_unix_time", start)
        if self.duration is not None:
            duration = as_float(self.duration, "duration", positive=True, fix=DURATION_FIX)
            object.__setattr__(self, "duration", duration)

    def to_dict(self) -> TimeSpan:
        """The range as a JSON-serialisable dict (``from_dict`` reads it back)."""
        return {"start_unix_time": self.start_unix_time, "duration": self.duration}

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, section: str = "TimeRange") -> TimeRange:
        """A TimeRange from ``{"start_unix_time": ..., "duration": ...}``."""
        keys = ("start_unix_time", "duration")
        return build(cls, given(check_keys(data, keys, section)), section)
