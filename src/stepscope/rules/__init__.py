"""Rules: pure functions of a job's data that return typed findings.

``evaluate_job(stepscope.open(path))`` judges a job offline; the live runner
(``python -m stepscope.rules.runner``) judges it while it runs. See docs/rules.md
for the built-in rules and docs/custom-rules.md to write your own.

Importing this package imports no rule: each name is resolved on first use, so that
``python -m stepscope.rules.runner`` (which imports this package first) starts
without pandas and DuckDB, and imports them once there is something to judge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stepscope.errors import RuleConfigError
    from stepscope.rules._balance import LoadBalancing
    from stepscope.rules._base import Rule
    from stepscope.rules._compile_rule import TorchCompile
    from stepscope.rules._cuda_memory import CUDAMemory
    from stepscope.rules._data_loading import DataLoading
    from stepscope.rules._device_time_rules import FP32MatMul, GPUIdleInSteps
    from stepscope.rules._evaluate import evaluate_input, evaluate_job, evaluate_rules, job_rules
    from stepscope.rules._gpu_idle import GPUIdleBetweenSteps
    from stepscope.rules._gpu_rules import GPUMemoryIncrease
    from stepscope.rules._host_rules import HostContention, MemoryPressure
    from stepscope.rules._init_rule import MaxInitializationTime
    from stepscope.rules._input import RuleInput
    from stepscope.rules._loader_rules import DataLoaderWorkers
    from stepscope.rules._node_rule import NodeRule, Part
    from stepscope.rules._overhead_rules import PythonOverhead
    from stepscope.rules._overlap_rules import CommunicationNotOverlapped, CopiesNotOverlapped
    from stepscope.rules._params import Param, ParamValue
    from stepscope.rules._registry import BUILTIN, MAX_RULES, PROFILER_REPORT, RuleSpec, build_rules
    from stepscope.rules._step_rules import StepOutlier
    from stepscope.rules._summary_rules import OverallFrameworkMetrics, OverallSystemUsage
    from stepscope.rules._system_rules import (
        BatchSize,
        CPUBottleneck,
        IOBottleneck,
        LowGPUUtilization,
    )
    from stepscope.rules._thread_rules import CPUBoundThreads
    from stepscope.rules._trace_source import TraceSource, TraceWindow
    from stepscope.rules._types import Finding, RuleResult, Status
    from stepscope.rules.debugging import DEBUGGING_RULES
    from stepscope.rules.diagnosis import Diagnosis, DiagnosisEntry, JobFacts, diagnose

# name -> the module that defines it
_LAZY = {
    "BUILTIN": "stepscope.rules._registry",
    "BatchSize": "stepscope.rules._system_rules",
    "CPUBottleneck": "stepscope.rules._system_rules",
    "CPUBoundThreads": "stepscope.rules._thread_rules",
    "CommunicationNotOverlapped": "stepscope.rules._overlap_rules",
    "CopiesNotOverlapped": "stepscope.rules._overlap_rules",
    "CUDAMemory": "stepscope.rules._cuda_memory",
    "TorchCompile": "stepscope.rules._compile_rule",
    "DEBUGGING_RULES": "stepscope.rules.debugging",
    "DataLoaderWorkers": "stepscope.rules._loader_rules",
    "DataLoading": "stepscope.rules._data_loading",
    "Diagnosis": "stepscope.rules.diagnosis",
    "DiagnosisEntry": "stepscope.rules.diagnosis",
    "FP32MatMul": "stepscope.rules._device_time_rules",
    "Finding": "stepscope.rules._types",
    "GPUIdleBetweenSteps": "stepscope.rules._gpu_idle",
    "GPUIdleInSteps": "stepscope.rules._device_time_rules",
    "GPUMemoryIncrease": "stepscope.rules._gpu_rules",
    "HostContention": "stepscope.rules._host_rules",
    "IOBottleneck": "stepscope.rules._system_rules",
    "JobFacts": "stepscope.rules.diagnosis",
    "LoadBalancing": "stepscope.rules._balance",
    "LowGPUUtilization": "stepscope.rules._system_rules",
    "MAX_RULES": "stepscope.rules._registry",
    "MaxInitializationTime": "stepscope.rules._init_rule",
    "MemoryPressure": "stepscope.rules._host_rules",
    "NodeRule": "stepscope.rules._node_rule",
    "OverallFrameworkMetrics": "stepscope.rules._summary_rules",
    "OverallSystemUsage": "stepscope.rules._summary_rules",
    "PROFILER_REPORT": "stepscope.rules._registry",
    "Param": "stepscope.rules._params",
    "ParamValue": "stepscope.rules._params",
    "Part": "stepscope.rules._node_rule",
    "PythonOverhead": "stepscope.rules._overhead_rules",
    "Rule": "stepscope.rules._base",
    "RuleConfigError": "stepscope.errors",
    "RuleInput": "stepscope.rules._input",
    "RuleResult": "stepscope.rules._types",
    "RuleSpec": "stepscope.rules._registry",
    "Status": "stepscope.rules._types",
    "StepOutlier": "stepscope.rules._step_rules",
    "TraceSource": "stepscope.rules._trace_source",
    "TraceWindow": "stepscope.rules._trace_source",
    "build_rules": "stepscope.rules._registry",
    "diagnose": "stepscope.rules.diagnosis",
    "evaluate_input": "stepscope.rules._evaluate",
    "evaluate_job": "stepscope.rules._evaluate",
    "evaluate_rules": "stepscope.rules._evaluate",
    "job_rules": "stepscope.rules._evaluate",
}

__all__ = [
    "BUILTIN",
    "DEBUGGING_RULES",
    "MAX_RULES",
    "PROFILER_REPORT",
    "BatchSize",
    "CPUBottleneck",
    "CPUBoundThreads",
    "CUDAMemory",
    "CommunicationNotOverlapped",
    "CopiesNotOverlapped",
    "DataLoaderWorkers",
    "DataLoading",
    "Diagnosis",
    "DiagnosisEntry",
    "FP32MatMul",
    "Finding",
    "GPUIdleBetweenSteps",
    "GPUIdleInSteps",
    "GPUMemoryIncrease",
    "HostContention",
    "IOBottleneck",
    "JobFacts",
    "LoadBalancing",
    "LowGPUUtilization",
    "MaxInitializationTime",
    "MemoryPressure",
    "NodeRule",
    "OverallFrameworkMetrics",
    "OverallSystemUsage",
    "Param",
    "ParamValue",
    "Part",
    "PythonOverhead",
    "Rule",
    "RuleConfigError",
    "RuleInput",
    "RuleResult",
    "RuleSpec",
    "Status",
    "StepOutlier",
    "TorchCompile",
    "TraceSource",
    "TraceWindow",
    "build_rules",
    "diagnose",
    "evaluate_input",
    "evaluate_job",
    "evaluate_rules",
    "job_rules",
]


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'stepscope.rules' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)
