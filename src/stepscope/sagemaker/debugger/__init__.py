"""``stepscope.sagemaker.debugger``: the names of ``sagemaker.debugger`` (docs/sagemaker.md)."""

from stepscope.sagemaker._hook import CollectionConfig, DebuggerHookConfig, TensorBoardOutputConfig
from stepscope.sagemaker._profiler import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    FrameworkProfile,
    Profiler,
    ProfilerConfig,
    PythonProfiler,
    PythonProfilingConfig,
    StepRange,
    TimeRange,
    cProfileTimer,
)
from stepscope.sagemaker._rules import ProfilerRule, Rule
from stepscope.sagemaker.debugger import metrics_config, rule_configs

__all__ = [
    "CollectionConfig",
    "DataloaderProfilingConfig",
    "DebuggerHookConfig",
    "DetailedProfilingConfig",
    "FrameworkProfile",
    "Profiler",
    "ProfilerConfig",
    "ProfilerRule",
    "PythonProfiler",
    "PythonProfilingConfig",
    "Rule",
    "StepRange",
    "TensorBoardOutputConfig",
    "TimeRange",
    "cProfileTimer",
    "metrics_config",
    "rule_configs",
]
