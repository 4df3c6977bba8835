"""``ProfilerRule`` and ``Rule``: the SDK's rule classes as stepscope rules entries.

Each object holds one entry of the job's ``[[rules]]`` (docs/rules.md), checked
against the rule registry when it is built: a bad parameter fails here, with the
rule's valid parameters, not when the job runs. The platform's placement
arguments (``instance_type``, ``volume_size_in_gb``, ``image_uri``, the output
paths) are accepted and unused: rules run on this machine and write into the job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from stepscope.config import CollectionConfig
from stepscope.errors import ConfigError
from stepscope.sagemaker._platform import is_remote
from stepscope.sagemaker._rule_configs import ActionList, BuiltInRule, RuleKind

Entry = dict[str, object]


def check_entry(entry: Mapping[str, object]) -> None:
    """Build the rule of ``entry`` once, so that its mistakes show now (RuleConfigError)."""
    from stepscope.rules import build_rules  # pandas and DuckDB: only when a rule is made

    build_rules([dict(entry)])


@dataclass(frozen=True)
class RuleBase:
    """One configured rule: ``entry`` is the stepscope rules entry it stands for."""

    name: str
    entry: Mapping[str, object]
    collections_to_save: tuple[CollectionConfig, ...] = field(default=())

    def to_entry(self) -> Entry:
        """The rules entry, for ``StepscopeConfig(rules=[...])``."""
        return dict(self.entry)


def _builtin(cls: type, base_config: object, kind: RuleKind, name: str | None) -> BuiltInRule:
    other = {"profiler": "Rule", "debugging": "ProfilerRule"}[kind]
    if not isinstance(base_config, BuiltInRule):
        raise ConfigError(
            f"{cls.__name__}.sagemaker needs a rule from rule_configs, e.g. "
            f"rule_configs.{'CPUBottleneck()' if kind == 'profiler' else 'vanishing_gradient()'}"
            f"; got {base_config!r}."
        )
    if base_config.kind != kind:
        raise ConfigError(
            f"{base_config.rule_name} is a {base_config.kind} rule: use "
            f"{other}.sagemaker(rule_configs...), not {cls.__name__}.sagemaker."
        )
    if name is not None and name != base_config.rule_name:
        raise ConfigError(
            f"name={name!r}: stepscope names a built-in rule by the rule "
            f"({base_config.rule_name}; its results are rules/{base_config.rule_name}.json). "
            "Fix: leave name out."
        )
    return base_config


def _custom_entry(
    name: str, source: str | None, rule_to_invoke: str | None, params: Mapping[str, object] | None
) -> Entry:
    if not source or not rule_to_invoke or is_remote(source):
        raise ConfigError(
            f"Custom rule {name}: stepscope runs a custom rule from a local Python file. "
            "Fix: give source='my_rules.py' (a local path) and rule_to_invoke='MyRule', a "
            "subclass of stepscope.rules.Rule (docs/custom-rules.md); images are not run."
        )
    entry: Entry = {"name": name, "source": os.path.abspath(source)}
    entry["rule_to_invoke"] = rule_to_invoke
    entry["parameters"] = dict(params or {})
    return entry


class ProfilerRule(RuleBase):
    """A profiler rule: ``ProfilerRule.sagemaker(rule_configs.StepOutlier(stddev=3))``."""

    @classmethod
    def sagemaker(
        cls,
        base_config: BuiltInRule,
        name: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        instance_type: str | None = None,
        volume_size_in_gb: int | None = None,
        rule_parameters: Mapping[str, object] | None = None,
    ) -> ProfilerRule:
        """A built-in profiler rule; ``rule_parameters`` override the base config's."""
        rule = _builtin(cls, base_config, "profiler", name).with_parameters(rule_parameters)
        entry: Entry = {"name": rule.rule_name, "parameters": dict(rule.rule_parameters)}
        check_entry(entry)
        return cls(rule.rule_name, entry)

    @classmethod
    def custom(
        cls,
        name: str,
        image_uri: str | None = None,
        instance_type: str | None = None,
        volume_size_in_gb: int | None = None,
        source: str | None = None,
        rule_to_invoke: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        rule_parameters: Mapping[str, object] | None = None,
    ) -> ProfilerRule:
        """A custom rule: the class ``rule_to_invoke`` of the local file ``source``."""
        entry = _custom_entry(name, source, rule_to_invoke, rule_parameters)
        check_entry(entry)
        return cls(name, entry)


def _actions(actions: object) -> list[object]:
    if actions is None:
        return []
    if not isinstance(actions, ActionList):
        actions = ActionList(*(actions if isinstance(actions, list | tuple) else [actions]))
    return actions.names()


def _other_trials(paths: object) -> None:
    if paths:
        raise ConfigError(
            "other_trials_s3_input_paths: stepscope's debugging rules judge one job. "
            "Fix: leave it out; compare jobs with `stepscope ui` (docs/dashboard.md)."
        )


class Rule(RuleBase):
    """A debugging rule: ``Rule.sagemaker(rule_configs.vanishing_gradient())``."""

    @classmethod
    def sagemaker(
        cls,
        base_config: BuiltInRule,
        name: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials_s3_input_paths: Sequence[str] | None = None,
        rule_parameters: Mapping[str, object] | None = None,
        collections_to_save: Sequence[CollectionConfig] | None = None,
        actions: object = None,
    ) -> Rule:
        """A built-in debugging rule; ``actions`` may be ``ActionList(StopTraining())``."""
        _other_trials(other_trials_s3_input_paths)
        rule = _builtin(cls, base_config, "debugging", name).with_parameters(rule_parameters)
        entry: Entry = {"name": rule.rule_name, "parameters": dict(rule.rule_parameters)}
        entry["actions"] = _actions(actions)
        check_entry(entry)
        return cls(rule.rule_name, entry, tuple(collections_to_save or ()))

    @classmethod
    def custom(
        cls,
        name: str,
        image_uri: str | None = None,
        instance_type: str | None = None,
        volume_size_in_gb: int | None = None,
        source: str | None = None,
        rule_to_invoke: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials_s3_input_paths: Sequence[str] | None = None,
        rule_parameters: Mapping[str, object] | None = None,
        collections_to_save: Sequence[CollectionConfig] | None = None,
        actions: object = None,
    ) -> Rule:
        """A custom rule: the class ``rule_to_invoke`` of the local file ``source``."""
        _other_trials(other_trials_s3_input_paths)
        entry = _custom_entry(name, source, rule_to_invoke, rule_parameters)
        entry["actions"] = _actions(actions)
        check_entry(entry)
        return cls(name, entry, tuple(collections_to_save or ()))
