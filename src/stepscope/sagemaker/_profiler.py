"""The profiler configuration with the SageMaker SDK's argument names.

Subclasses of :mod:`stepscope.config`'s classes (the one model): they only rename
the SDK's arguments and drop what means nothing here; everything else, validation
included, is stepscope's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepscope import config
from stepscope.sagemaker._platform import output_root, staging_path

DataloaderProfilingConfig = config.DataloaderProfilingConfig
DetailedProfilingConfig = config.DetailedProfilingConfig
Profiler = config.Profiler
PythonProfiler = config.PythonProfiler
PythonProfilingConfig = config.PythonProfilingConfig
StepRange = config.StepRange
TimeRange = config.TimeRange
cProfileTimer = config.cProfileTimer


@dataclass(frozen=True)
class FrameworkProfile(config.FrameworkProfile):
    """``stepscope.config.FrameworkProfile``; the container's ``local_path``
    (``/opt/ml/output/profiler``, the SDK's default) means "inside the job folder"."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "local_path", staging_path(self.local_path))
        super().__post_init__()


class ProfilerConfig(config.ProfilerConfig):
    """``stepscope.config.ProfilerConfig`` built with the SDK's arguments.

    ``s3_output_path`` is the output folder of the jobs when it is a local path
    (or ``file://``); an ``s3://`` URL is dropped with a ``PlatformArgumentWarning``.
    ``profiler_params`` (the spelling of the SDK's own example) is ``profile_params``.
    """

    def __init__(
        self,
        s3_output_path: str | None = None,
        system_monitor_interval_millis: int | None = None,
        framework_profile_params: config.FrameworkProfile | None = None,
        profile_params: config.Profiler | None = None,
        disable_profiler: bool = False,
        profiler_params: config.Profiler | None = None,
    ) -> None:
        super().__init__(
            output_root(s3_output_path, "ProfilerConfig(s3_output_path)"),
            system_monitor_interval_millis,  # type: ignore[arg-type]  # None: 500 ms, checked
            framework_profile_params,
            profile_params if profile_params is not None else profiler_params,
            disable_profiler,
        )
