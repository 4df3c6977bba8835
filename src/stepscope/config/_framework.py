"""FrameworkProfile: which framework profiling windows run, and when."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from stepscope.config._base import (
    MAX_CHEAP_SECONDS,
    MAX_CHEAP_STEPS,
    ProfilingCostWarning,
    as_float,
    as_int,
    as_text,
    build,
    check_keys,
    field_names,
    given,
    invalid,
)
from stepscope.config._metrics import SECTION, MetricsConfigBase, check_range_conflict
from stepscope.config._profiling_options import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    MemoryProfilingConfig,
    PythonProfilingConfig,
)
from stepscope.config._ranges import StepRange, TimeRange
from stepscope.config._window import ProfilingWindow, check_live_limits
from stepscope.errors import ConfigError

_OPTIONS: dict[str, type[MetricsConfigBase]] = {
    "detailed_profiling_config": DetailedProfilingConfig,
    "dataloader_profiling_config": DataloaderProfilingConfig,
    "python_profiling_config": PythonProfilingConfig,
    "memory_profiling_config": MemoryProfilingConfig,
}
# Options that run only where named: never in the default scenario.
_OPT_IN = ("memory_profiling_config",)
_UNSUPPORTED = ("horovod_profiling_config", "smdataparallel_profiling_config")


@dataclass(frozen=True)
class FrameworkProfile:
    """Framework profiling: detailed (PyTorch profiler), dataloader and Python profiling.

    As in the seed: with no argument every option runs at its default steps; a
    common step or time range (``start_step``/``num_steps`` or
    ``start_unix_time``/``duration``) applies to every option; with individual
    ``*_profiling_config`` only those options run, and the common range is ignored.
    :meth:`windows` gives the result. ``local_path`` None means "inside the job
    folder"; the ``file_*`` limits apply to the trace files the profilers write.
    """

    local_path: str | None = None
    file_max_size: int = 10485760
    file_close_interval: float = 60
    file_open_fail_threshold: int = 50
    detailed_profiling_config: DetailedProfilingConfig | None = None
    dataloader_profiling_config: DataloaderProfilingConfig | None = None
    python_profiling_config: PythonProfilingConfig | None = None
    memory_profiling_config: MemoryProfilingConfig | None = None
    horovod_profiling_config: object = None
    smdataparallel_profiling_config: object = None
    start_step: int | None = None
    num_steps: int | None = None
    start_unix_time: float | None = None
    duration: float | None = None

    def __post_init__(self) -> None:
        for name in _UNSUPPORTED:
            if getattr(self, name) is not None:
                raise ConfigError(
                    f"{name} is not supported: use torchrun (torch.distributed) instead of "
                    "Horovod or SageMaker distributed data parallel; stepscope profiles every "
                    f"rank that torchrun starts. Fix: remove {name}."
                )
        object.__setattr__(
            self, "local_path", as_text(self.local_path, "local_path", allow_none=True)
        )
        for name in ("file_max_size", "file_open_fail_threshold"):
            object.__setattr__(self, name, as_int(getattr(self, name), name, 1))
        interval = as_float(self.file_close_interval, "file_close_interval", positive=True)
        object.__setattr__(self, "file_close_interval", interval)
        for name, option in _OPTIONS.items():
            value = getattr(self, name)
            if isinstance(value, Mapping):
                value = option.from_dict(value)
                object.__setattr__(self, name, value)
            elif value is not None and not isinstance(value, option):
                raise invalid(value, name, f"a {option.__name__}, a dict of its parameters or None")
        steps = StepRange(self.start_step, self.num_steps)
        times = TimeRange(self.start_unix_time, self.duration)
        check_range_conflict("FrameworkProfile", steps, times)
        for name, value in {**steps.to_dict(), **times.to_dict()}.items():
            object.__setattr__(self, name, value)
        for window in self.windows():
            check_live_limits(window, planned=True)  # the limits of a live request
            _warn_if_costly(window)

    @property
    def options(self) -> list[MetricsConfigBase]:
        """The profiling options that run, after the seed's three scenarios."""
        chosen = [getattr(self, name) for name in _OPTIONS]
        if any(option is not None for option in chosen):
            return [option for option in chosen if option is not None]
        return [
            option(
                start_step=self.start_step,
                num_steps=self.num_steps,
                start_unix_time=self.start_unix_time,
                duration=self.duration,
            )
            for name, option in _OPTIONS.items()
            if name not in _OPT_IN
        ]

    def windows(self) -> list[ProfilingWindow]:
        """Every resolved profiling window, in the order detailed, dataloader, python."""
        return [window for option in self.options for window in option.windows()]

    def to_dict(self) -> dict[str, object]:
        """The profile as a JSON-serialisable dict (``from_dict`` reads it back)."""
        out: dict[str, object] = {}
        for name in field_names(self):
            value = getattr(self, name)
            if name in _UNSUPPORTED:
                continue
            out[name] = value.to_dict() if isinstance(value, MetricsConfigBase) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, section: str = SECTION) -> FrameworkProfile:
        """A FrameworkProfile from a dict of its parameters; option dicts are nested."""
        return build(cls, given(check_keys(data, field_names(cls), section)), section)


def _warn_if_costly(window: ProfilingWindow) -> None:
    """Warn when a detailed or dataloader window is long enough to slow training."""
    if window.kind in ("python", "memory"):  # memory: limited by max_entries
        return
    if window.num_steps is not None and window.num_steps > MAX_CHEAP_STEPS:
        size = f"{window.num_steps} steps"
    elif window.duration is not None and window.duration > MAX_CHEAP_SECONDS:
        size = f"{window.duration:g} s"
    else:
        return
    warnings.warn(
        f"{window.kind.capitalize()} profiling of {size} is costly: it slows every profiled "
        f"step and writes large traces. Profile at most {MAX_CHEAP_STEPS} steps or "
        f"{MAX_CHEAP_SECONDS:g} s (e.g. num_steps={MAX_CHEAP_STEPS}) unless you need more.",
        ProfilingCostWarning,
        stacklevel=4,
    )
