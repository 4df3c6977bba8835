"""Rules: pure functions of a job's data that return typed findings.

``evaluate_job(stepscope.open(path))`` judges a job offline; the live runner
(``python -m stepscope.rules.runner``) judges it while it runs. See docs/rules.md
for the built-in rules and docs/custom-rules.md to write your own.
"""

from stepscope.errors import RuleConfigError
from stepscope.rules._balance import LoadBalancing
from stepscope.rules._base import Rule
from stepscope.rules._data_loading import DataLoading
from stepscope.rules._evaluate import evaluate_input, evaluate_job, evaluate_rules, job_rules
from stepscope.rules._gpu_idle import GPUIdleBetweenSteps
from stepscope.rules._gpu_rules import GPUMemoryIncrease
from stepscope.rules._host_rules import HostContention, MemoryPressure
from stepscope.rules._init_rule import MaxInitializationTime
from stepscope.rules._input import RuleInput
from stepscope.rules._loader_rules import DataLoaderWorkers
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._overhead_rules import PythonOverhead
from stepscope.rules._params import Param, ParamValue
from stepscope.rules._registry import BUILTIN, MAX_RULES, PROFILER_REPORT, RuleSpec, build_rules
from stepscope.rules._step_rules import StepOutlier
from stepscope.rules._summary_rules import OverallFrameworkMetrics, OverallSystemUsage
from stepscope.rules._system_rules import BatchSize, CPUBottleneck, IOBottleneck, LowGPUUtilization
from stepscope.rules._thread_rules import CPUBoundThreads
from stepscope.rules._types import Finding, RuleResult, Status
from stepscope.rules.debugging import DEBUGGING_RULES
from stepscope.rules.diagnosis import Diagnosis, DiagnosisEntry, JobFacts, diagnose

__all__ = [
    "BUILTIN",
    "DEBUGGING_RULES",
    "MAX_RULES",
    "PROFILER_REPORT",
    "BatchSize",
    "CPUBottleneck",
    "CPUBoundThreads",
    "DataLoaderWorkers",
    "DataLoading",
    "Diagnosis",
    "DiagnosisEntry",
    "Finding",
    "GPUIdleBetweenSteps",
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
    "build_rules",
    "diagnose",
    "evaluate_input",
    "evaluate_job",
    "evaluate_rules",
    "job_rules",
]
