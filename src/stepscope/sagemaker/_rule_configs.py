"""``rule_configs``: the built-in rules by the SageMaker SDK's names, and rule actions
(``StopTraining``; ``Email`` and ``SMS`` through a webhook or a command).

Profiler rules are named as classes (``rule_configs.CPUBottleneck(threshold=60)``),
debugging rules as functions (``rule_configs.vanishing_gradient()``), as in the
SDK. Each returns a :class:`BuiltInRule`, which names one rule of stepscope's
registry (``stepscope.rules.BUILTIN``) and its parameters; ``ProfilerRule.sagemaker``
and ``Rule.sagemaker`` check the parameters against the rule. Importing this module
imports no rule (the rules need pandas and DuckDB).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from stepscope.sagemaker._rule_actions import (
    SMS,
    ActionList,
    Command,
    Email,
    Notify,
    StopTraining,
    Webhook,
)

RuleKind = Literal["profiler", "debugging"]
# Set by the platform to the job being judged; a rule here always judges its own job.
PLATFORM_PARAMETERS = ("base_trial",)
# The actions (StopTraining; Email, SMS, Webhook, Command) live in _rule_actions.


@dataclass(frozen=True)
class BuiltInRule:
    """A built-in rule and its parameters (``kind``: which of the two classes runs it)."""

    rule_name: str
    kind: RuleKind
    rule_parameters: Mapping[str, object] = field(default_factory=dict)

    def with_parameters(self, extra: Mapping[str, object] | None) -> BuiltInRule:
        """This rule with ``extra`` parameters over its own (the SDK's ``rule_parameters``)."""
        merged = {**self.rule_parameters, **(extra or {})}
        kept = {k: v for k, v in merged.items() if k not in PLATFORM_PARAMETERS}
        return BuiltInRule(self.rule_name, self.kind, kept)


def _maker(name: str, kind: RuleKind) -> Callable[..., BuiltInRule]:
    def config(**rule_parameters: object) -> BuiltInRule:
        return BuiltInRule(name, kind, {}).with_parameters(rule_parameters)

    config.__name__ = config.__qualname__ = name
    config.__doc__ = f"The built-in {kind} rule {name}: keyword arguments are its parameters."
    return config


# The profiler rules of the seeds, then stepscope's own (docs/rules.md).
ProfilerReport = _maker("ProfilerReport", "profiler")
BatchSize = _maker("BatchSize", "profiler")
CPUBottleneck = _maker("CPUBottleneck", "profiler")
GPUMemoryIncrease = _maker("GPUMemoryIncrease", "profiler")
IOBottleneck = _maker("IOBottleneck", "profiler")
LoadBalancing = _maker("LoadBalancing", "profiler")
LowGPUUtilization = _maker("LowGPUUtilization", "profiler")
OverallSystemUsage = _maker("OverallSystemUsage", "profiler")
MaxInitializationTime = _maker("MaxInitializationTime", "profiler")
OverallFrameworkMetrics = _maker("OverallFrameworkMetrics", "profiler")
StepOutlier = _maker("StepOutlier", "profiler")
CPUBoundThreads = _maker("CPUBoundThreads", "profiler")
CUDAMemory = _maker("CUDAMemory", "profiler")
DataLoaderWorkers = _maker("DataLoaderWorkers", "profiler")
DataLoading = _maker("DataLoading", "profiler")
GPUIdleBetweenSteps = _maker("GPUIdleBetweenSteps", "profiler")
HostContention = _maker("HostContention", "profiler")
MemoryPressure = _maker("MemoryPressure", "profiler")
PythonOverhead = _maker("PythonOverhead", "profiler")
Straggler = _maker("Straggler", "profiler")
GPUIdleInSteps = _maker("GPUIdleInSteps", "profiler")
CopiesNotOverlapped = _maker("CopiesNotOverlapped", "profiler")
CommunicationNotOverlapped = _maker("CommunicationNotOverlapped", "profiler")
FP32MatMul = _maker("FP32MatMul", "profiler")
TorchCompile = _maker("TorchCompile", "profiler")

# The debugging rules (../shared/debugging-rules.md), by the SDK's function names.
all_zero = _maker("AllZero", "debugging")
class_imbalance = _maker("ClassImbalance", "debugging")
dead_relu = _maker("DeadRelu", "debugging")
exploding_tensor = _maker("ExplodingTensor", "debugging")
loss_not_decreasing = _maker("LossNotDecreasing", "debugging")
overfit = _maker("Overfit", "debugging")
overtraining = _maker("Overtraining", "debugging")
poor_weight_initialization = _maker("PoorWeightInitialization", "debugging")
saturated_activation = _maker("SaturatedActivation", "debugging")
stalled_training_rule = _maker("StalledTrainingRule", "debugging")
tensor_variance = _maker("TensorVariance", "debugging")
unchanged_tensor = _maker("UnchangedTensor", "debugging")
vanishing_gradient = _maker("VanishingGradient", "debugging")
weight_update_ratio = _maker("WeightUpdateRatio", "debugging")

PROFILER_RULES = {
    f.__name__: f
    for f in (
        ProfilerReport, BatchSize, CPUBottleneck, GPUMemoryIncrease, IOBottleneck,
        LoadBalancing, LowGPUUtilization, OverallSystemUsage, MaxInitializationTime,
        OverallFrameworkMetrics, StepOutlier, CPUBoundThreads, CUDAMemory, DataLoaderWorkers,
        DataLoading, GPUIdleBetweenSteps, HostContention, MemoryPressure, PythonOverhead,
        Straggler, GPUIdleInSteps, CopiesNotOverlapped, CommunicationNotOverlapped,
        FP32MatMul, TorchCompile,
    )
}  # fmt: skip
DEBUGGING_RULES = {
    "all_zero": all_zero,
    "class_imbalance": class_imbalance,
    "dead_relu": dead_relu,
    "exploding_tensor": exploding_tensor,
    "loss_not_decreasing": loss_not_decreasing,
    "overfit": overfit,
    "overtraining": overtraining,
    "poor_weight_initialization": poor_weight_initialization,
    "saturated_activation": saturated_activation,
    "stalled_training_rule": stalled_training_rule,
    "tensor_variance": tensor_variance,
    "unchanged_tensor": unchanged_tensor,
    "vanishing_gradient": vanishing_gradient,
    "weight_update_ratio": weight_update_ratio,
}


__all__ = [
    "DEBUGGING_RULES",
    "PROFILER_RULES",
    "SMS",
    "ActionList",
    "BatchSize",
    "BuiltInRule",
    "CPUBottleneck",
    "CPUBoundThreads",
    "CUDAMemory",
    "Command",
    "CommunicationNotOverlapped",
    "CopiesNotOverlapped",
    "DataLoaderWorkers",
    "DataLoading",
    "Email",
    "FP32MatMul",
    "GPUIdleBetweenSteps",
    "GPUIdleInSteps",
    "GPUMemoryIncrease",
    "HostContention",
    "IOBottleneck",
    "LoadBalancing",
    "LowGPUUtilization",
    "MaxInitializationTime",
    "MemoryPressure",
    "Notify",
    "OverallFrameworkMetrics",
    "OverallSystemUsage",
    "ProfilerReport",
    "PythonOverhead",
    "StepOutlier",
    "StopTraining",
    "Straggler",
    "TorchCompile",
    "Webhook",
    "all_zero",
    "class_imbalance",
    "dead_relu",
    "exploding_tensor",
    "loss_not_decreasing",
    "overfit",
    "overtraining",
    "poor_weight_initialization",
    "saturated_activation",
    "stalled_training_rule",
    "tensor_variance",
    "unchanged_tensor",
    "vanishing_gradient",
    "weight_update_ratio",
]
