"""Profiler (deep profiling) and ProfilerConfig (everything the profiler collects)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stepscope.config._base import (
    as_bool,
    as_float,
    as_int,
    as_text,
    build,
    check_keys,
    field_names,
    fields_to_dict,
    given,
    invalid,
)
from stepscope.config._framework import FrameworkProfile
from stepscope.errors import ConfigError

SYSTEM_MONITOR_INTERVALS = (100, 200, 500, 1000, 5000, 60000)
SECTION = "profiler"
# Seed names that differ from ours (the seed's own example spells "profiler_params").
_ALIASES = {"s3_output_path": "output_path", "profiler_params": "profile_params"}


def check_interval(value: object) -> int:
    """``value`` as one of the accepted sampling intervals (None is the seed's 500 ms)."""
    if value is None:
        return 500
    try:
        interval = as_int(value, "system_monitor_interval_millis", 0)
    except ConfigError:
        interval = -1
    if interval not in SYSTEM_MONITOR_INTERVALS:
        accepted = ", ".join(map(str, SYSTEM_MONITOR_INTERVALS))
        raise invalid(value, "system_monitor_interval_millis", accepted)
    return interval


@dataclass(frozen=True)
class Profiler:
    """Deep profiling of CPU activity for ``cpu_profiling_duration`` seconds (> 0).

    The seed types the duration as a string; numbers and numeric strings are accepted
    and stored as a float.
    """

    cpu_profiling_duration: float = 3600

    def __post_init__(self) -> None:
        duration = as_float(
            self.cpu_profiling_duration,
            "cpu_profiling_duration",
            positive=True,
            fix="Give seconds, e.g. cpu_profiling_duration=3600.",
        )
        object.__setattr__(self, "cpu_profiling_duration", duration)

    def to_dict(self) -> dict[str, object]:
        """The settings as a JSON-serialisable dict (``from_dict`` reads it back)."""
        return fields_to_dict(self)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, object], *, section: str = f"{SECTION}.profile_params"
    ) -> Profiler:
        """A Profiler from ``{"cpu_profiling_duration": ...}``."""
        return build(cls, given(check_keys(data, field_names(cls), section)), section)


@dataclass(frozen=True)
class ProfilerConfig:
    """What the profiler collects and where it writes it (the seed's ``ProfilerConfig``).

    ``output_path`` is the seed's ``s3_output_path``: the folder or URL under which
    job folders are written; None means ``JobConfig.output``. The system metrics are
    sampled every ``system_monitor_interval_millis`` ms (one of 100, 200, 500, 1000,
    5000, 60000); ``disable_profiler`` turns system monitoring off. Framework
    profiling runs only if ``framework_profile_params`` is given. ``profile_params``
    also accepts a dict of :class:`Profiler` parameters.
    """

    output_path: str | None = None
    system_monitor_interval_millis: int = 500
    framework_profile_params: FrameworkProfile | None = None
    profile_params: Profiler | None = None
    disable_profiler: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "output_path", as_text(self.output_path, "output_path", allow_none=True)
        )
        object.__setattr__(
            self,
            "system_monitor_interval_millis",
            check_interval(self.system_monitor_interval_millis),
        )
        framework = self.framework_profile_params
        if isinstance(framework, Mapping):
            framework = FrameworkProfile.from_dict(framework)
        elif framework is not None and not isinstance(framework, FrameworkProfile):
            raise invalid(
                framework, "framework_profile_params", "a FrameworkProfile, a dict or None"
            )
        object.__setattr__(self, "framework_profile_params", framework)
        profile = self.profile_params
        if isinstance(profile, Mapping):
            profile = Profiler.from_dict(profile)
        elif profile is not None and not isinstance(profile, Profiler):
            raise invalid(profile, "profile_params", "a Profiler, a dict or None")
        object.__setattr__(self, "profile_params", profile)
        disable = as_bool(self.disable_profiler, "disable_profiler")
        object.__setattr__(self, "disable_profiler", disable)

    def to_dict(self) -> dict[str, object]:
        """The configuration as a JSON-serialisable dict (``from_dict`` reads it back)."""
        return fields_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, section: str = SECTION) -> ProfilerConfig:
        """A ProfilerConfig from a dict; accepts the seed's ``s3_output_path``."""
        valid = [*field_names(cls), *_ALIASES]
        return build(cls, given(check_keys(data, valid, section), _ALIASES), section)
