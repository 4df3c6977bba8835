"""Collections at run time: which tensors each one selects, and on which steps.

Built from the job's configuration (``[debugger]`` and the enabled ``[[rules]]``)
when the agent starts. Tensors come in kinds (``loss``, ``weight``, ``bias``,
``gradient``, ``input``, ``output``, ``optimizer``); a built-in
collection selects kinds, an ``include_regex`` selects names (matched from the
start, case-insensitively, against the tensor's name and its alias).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stepscope.config import (
    BUILTIN_COLLECTIONS,
    PHASES,
    CollectionConfig,
    DebuggerHookConfig,
    SaveConfig,
)

KINDS = ("loss", "weight", "bias", "gradient", "input", "output", "optimizer")
_BUILTIN_KINDS: dict[str, frozenset[str]] = {
    "all": frozenset(KINDS),
    "default": frozenset({"loss"}),
    "losses": frozenset({"loss"}),
    "weights": frozenset({"weight"}),
    "biases": frozenset({"bias"}),
    "gradients": frozenset({"gradient"}),
    "inputs": frozenset({"input"}),
    "outputs": frozenset({"output"}),
    "optimizer_variables": frozenset({"optimizer"}),
}

# The collections each debugging rule reads; enabling the rule enables them.
RULE_COLLECTIONS: dict[str, tuple[CollectionConfig, ...]] = {
    "VanishingGradient": (CollectionConfig("gradients"),),
    "ExplodingTensor": (CollectionConfig("losses"), CollectionConfig("gradients")),
    "LossNotDecreasing": (CollectionConfig("losses"),),
    "Overfit": (CollectionConfig("losses"),),
    "Overtraining": (CollectionConfig("losses"),),
    "DeadRelu": (CollectionConfig("relu_output", {"include_regex": ".*relu_output"}),),
    "PoorWeightInitialization": (
        CollectionConfig("relu_input", {"include_regex": ".*relu_input"}),
        CollectionConfig("gradients"),
        CollectionConfig("losses"),
    ),
    "SaturatedActivation": (
        CollectionConfig("tanh_input", {"include_regex": ".*tanh_input"}),
        CollectionConfig("sigmoid_input", {"include_regex": ".*sigmoid_input"}),
    ),
    "WeightUpdateRatio": (CollectionConfig("weights"),),
    "AllZero": (CollectionConfig("weights"), CollectionConfig("gradients")),
    "UnchangedTensor": (CollectionConfig("weights"), CollectionConfig("gradients")),
    "TensorVariance": (CollectionConfig("weights"), CollectionConfig("gradients")),
    "ClassImbalance": (
        CollectionConfig("labels", {"include_regex": ".*loss_input_1"}),
        CollectionConfig("predictions", {"include_regex": ".*loss_input_0"}),
    ),
    "StalledTrainingRule": (),
}


@dataclass
class Collection:
    """One collection as the capture uses it."""

    name: str
    kinds: frozenset[str]
    regex: re.Pattern[str] | None
    schedules: dict[str, SaveConfig]
    reductions: tuple[str, ...] = ()
    save_raw: bool = True
    _memo: dict[tuple[str, str], bool] = field(default_factory=dict, repr=False)

    def saves(self, phase: str, step: int) -> bool:
        """Whether this collection saves step ``step`` of ``phase``."""
        return self.schedules[phase].saves(step)

    def selects(self, kind: str, name: str, alias: str = "") -> bool:
        """Whether this collection holds the tensor ``name`` of ``kind`` (memoised)."""
        key = (kind, name)
        hit = self._memo.get(key)
        if hit is None:
            hit = kind in self.kinds and (
                self.regex is None
                or bool(self.regex.match(name) or (alias and self.regex.match(alias)))
            )
            self._memo[key] = hit
        return hit


def from_config(config: CollectionConfig) -> Collection:
    """The run-time collection of ``config`` (its defaults already merged)."""
    regex = re.compile(config.include_regex, re.IGNORECASE) if config.include_regex else None
    kinds = _BUILTIN_KINDS.get(config.name)
    if kinds is None:  # a user collection selects by name among every kind
        kinds = frozenset(KINDS) if regex is not None else frozenset()
    reductions = config.reductions
    raw = config.parameters.get("save_raw_tensor")
    return Collection(
        name=config.name,
        kinds=kinds,
        regex=regex,
        schedules={p: config.schedule(p) for p in PHASES},
        reductions=reductions,
        save_raw=bool(raw) if raw is not None else not reductions,
    )


# Rule parameters that choose what a rule's collection selects.
_REGEX_PARAMS = {
    ("DeadRelu", "tensor_regex"): "relu_output",
    ("PoorWeightInitialization", "activation_inputs_regex"): "relu_input",
    ("ClassImbalance", "labels_regex"): "labels",
    ("ClassImbalance", "predictions_regex"): "predictions",
}


def rule_collections(entry: object) -> list[CollectionConfig]:
    """The collections a ``[[rules]]`` entry needs, its regex parameters applied."""
    if not isinstance(entry, Mapping):
        return []
    name = str(entry.get("name"))
    params = dict(entry.get("parameters") or entry.get("rule_parameters") or {})
    out = []
    for c in RULE_COLLECTIONS.get(name, ()):
        regex = next(
            (
                params[p]
                for (r, p), coll in _REGEX_PARAMS.items()
                if r == name and coll == c.name and params.get(p)
            ),
            None,
        )
        out.append(CollectionConfig(c.name, {"include_regex": regex}) if regex else c)
    names = [n.strip() for n in str(params.get("collection_names") or "").split(",")]
    out += [CollectionConfig(n) for n in names if n in BUILTIN_COLLECTIONS]
    return out


def resolve(config: Mapping[str, Any]) -> list[Collection]:
    """The collections of a job: the configured ones, the losses by default, and
    those the enabled debugging rules need (``config`` as StepscopeConfig.to_dict())."""
    raw = config.get("debugger")
    hook = DebuggerHookConfig.from_dict(raw) if raw else DebuggerHookConfig()
    defaults = dict(hook.hook_parameters)
    wanted = list(hook.collection_configs)
    if defaults.get("save_all"):
        wanted.append(CollectionConfig("all"))
    if not {c.name for c in wanted} & {"losses", "default", "all"}:
        wanted.append(CollectionConfig("default"))
    for entry in config.get("rules") or ():
        wanted += rule_collections(entry)
    seen: dict[str, CollectionConfig] = {}
    for c in wanted:
        seen.setdefault(c.name, c.with_defaults(defaults))
    return [from_config(c) for c in seen.values()]


__all__ = ["BUILTIN_COLLECTIONS", "KINDS", "RULE_COLLECTIONS", "Collection", "resolve"]
