"""The one configuration model of stepscope, named as in the SageMaker SDK.

Frozen dataclasses validated when built; every class has ``to_dict()`` and
``from_dict()``. :func:`resolve_config` reads a TOML file, the environment and
command-line arguments (in that order of precedence). See docs/config.md.
"""

from __future__ import annotations

from stepscope.config._actions import (
    WEBHOOK_KINDS,
    CommandAction,
    RuleAction,
    WebhookAction,
    parse_action,
)
from stepscope.config._base import (
    MAX_CHEAP_SECONDS,
    MAX_CHEAP_STEPS,
    Json,
    ProfilingCostWarning,
    suggest,
)
from stepscope.config._collection_params import BUILTIN_COLLECTIONS, PHASES, SaveConfig
from stepscope.config._debugger import CollectionConfig, DebuggerHookConfig
from stepscope.config._framework import FrameworkProfile
from stepscope.config._metrics import MetricsConfigBase
from stepscope.config._profiler import SYSTEM_MONITOR_INTERVALS, Profiler, ProfilerConfig
from stepscope.config._profiling_options import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    MemoryProfilingConfig,
    PythonProfilingConfig,
)
from stepscope.config._ranges import PythonProfiler, StepRange, TimeRange, cProfileTimer
from stepscope.config._resolve import ENV_VARS, load_toml, resolve_config
from stepscope.config._rule_inputs import RULE_INPUTS, missing_rule_inputs
from stepscope.config._stepscope import DEFAULT_OUTPUT, JobConfig, StepscopeConfig
from stepscope.config._window import (
    LIVE_WINDOW_LIMITS,
    WINDOW_KINDS,
    ProfilingWindow,
    WindowKind,
    WindowLimit,
    check_live_limits,
)
from stepscope.errors import ConfigError

__all__ = [
    "BUILTIN_COLLECTIONS",
    "DEFAULT_OUTPUT",
    "ENV_VARS",
    "LIVE_WINDOW_LIMITS",
    "MAX_CHEAP_SECONDS",
    "MAX_CHEAP_STEPS",
    "PHASES",
    "RULE_INPUTS",
    "SYSTEM_MONITOR_INTERVALS",
    "WEBHOOK_KINDS",
    "WINDOW_KINDS",
    "CollectionConfig",
    "CommandAction",
    "ConfigError",
    "DataloaderProfilingConfig",
    "DebuggerHookConfig",
    "DetailedProfilingConfig",
    "FrameworkProfile",
    "JobConfig",
    "Json",
    "MemoryProfilingConfig",
    "MetricsConfigBase",
    "Profiler",
    "ProfilerConfig",
    "ProfilingCostWarning",
    "ProfilingWindow",
    "PythonProfiler",
    "PythonProfilingConfig",
    "RuleAction",
    "SaveConfig",
    "StepRange",
    "StepscopeConfig",
    "TimeRange",
    "WebhookAction",
    "WindowKind",
    "WindowLimit",
    "cProfileTimer",
    "check_live_limits",
    "load_toml",
    "missing_rule_inputs",
    "parse_action",
    "resolve_config",
    "suggest",
]
