"""The debugging rules: rules over the output tensors of a job (docs/tensors.md).

Each rule declares the collections it reads (``collections``); configuring the
rule in ``[[rules]]`` makes the agent save them (``RULE_COLLECTIONS``).
"""

from stepscope.rules.debugging._activation_rules import (
    ClassImbalance,
    DeadRelu,
    SaturatedActivation,
)
from stepscope.rules.debugging._base import TensorRule
from stepscope.rules.debugging._gradient_rules import (
    ExplodingTensor,
    PoorWeightInitialization,
    VanishingGradient,
    WeightUpdateRatio,
)
from stepscope.rules.debugging._loss_decrease import LossNotDecreasing
from stepscope.rules.debugging._loss_rules import Overfit, Overtraining
from stepscope.rules.debugging._tensor_rules import (
    AllZero,
    StalledTrainingRule,
    TensorVariance,
    UnchangedTensor,
)

DEBUGGING_RULES: dict[str, type[TensorRule]] = {
    c.name: c
    for c in (
        AllZero,
        ClassImbalance,
        DeadRelu,
        ExplodingTensor,
        LossNotDecreasing,
        Overfit,
        Overtraining,
        PoorWeightInitialization,
        SaturatedActivation,
        StalledTrainingRule,
        TensorVariance,
        UnchangedTensor,
        VanishingGradient,
        WeightUpdateRatio,
    )
}

__all__ = [
    "DEBUGGING_RULES",
    "AllZero",
    "ClassImbalance",
    "DeadRelu",
    "ExplodingTensor",
    "LossNotDecreasing",
    "Overfit",
    "Overtraining",
    "PoorWeightInitialization",
    "SaturatedActivation",
    "StalledTrainingRule",
    "TensorRule",
    "TensorVariance",
    "UnchangedTensor",
    "VanishingGradient",
    "WeightUpdateRatio",
]
