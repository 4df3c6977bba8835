"""Rules: pure functions of a job's data that return typed findings.

``evaluate_job(stepscope.open(path))`` judges a job offline; the live runner
(``python -m stepscope.rules.runner``) judges it while it runs. See docs/rules.md
for the built-in rules and docs/custom-rules.md to write your own.
"""

from ._balance import LoadBalancing
from ._base import NodeRule, Part, Rule
from ._evaluate import evaluate_input, evaluate_job, evaluate_rules, job_rules
from ._gpu_rules import GPUIdleBetweenSteps, GPUMemoryIncrease
from ._input import RuleInput
from ._params import Param, RuleConfigError
from ._registry import BUILTIN, MAX_RULES, PROFILER_REPORT, RuleSpec, build_rules
from ._step_rules import DataLoading, MaxInitializationTime, StepOutlier
from ._summary_rules import OverallFrameworkMetrics, OverallSystemUsage
from ._system_rules import BatchSize, CPUBottleneck, IOBottleneck, LowGPUUtilization
from ._types import Finding, RuleResult, Status

__all__ = [
    "BUILTIN",
    "MAX_RULES",
    "PROFILER_REPORT",
    "BatchSize",
    "CPUBottleneck",
    "DataLoading",
    "Finding",
    "GPUIdleBetweenSteps",
    "GPUMemoryIncrease",
    "IOBottleneck",
    "LoadBalancing",
    "LowGPUUtilization",
    "MaxInitializationTime",
    "NodeRule",
    "OverallFrameworkMetrics",
    "OverallSystemUsage",
    "Param",
    "Part",
    "Rule",
    "RuleConfigError",
    "RuleInput",
    "RuleResult",
    "RuleSpec",
    "Status",
    "StepOutlier",
    "build_rules",
    "evaluate_input",
    "evaluate_job",
    "evaluate_rules",
    "job_rules",
]
