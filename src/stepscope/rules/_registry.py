"""The rule set of a job: built-in rules, ProfilerReport, custom rules, actions.

``config.rules`` in job.json is a list of entries (docs/rules.md)::

    {"name": "StepOutlier", "parameters": {"stddev": 3}, "actions": ["stop"]}
    {"name": "ProfilerReport", "parameters": {"CPUBottleneck_cpu_threshold": 90}}
    {"name": "MyRule", "source": "my_rules.py", "rule_to_invoke": "MyRule", "parameters": {}}

An empty list means ProfilerReport with its defaults.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stepscope.errors import ConfigError, RuleConfigError
from stepscope.rules._balance import LoadBalancing
from stepscope.rules._base import Rule
from stepscope.rules._compile_rule import TorchCompile
from stepscope.rules._cuda_memory import CUDAMemory
from stepscope.rules._data_loading import DataLoading
from stepscope.rules._device_time_rules import FP32MatMul, GPUIdleInSteps
from stepscope.rules._gpu_idle import GPUIdleBetweenSteps
from stepscope.rules._gpu_rules import GPUMemoryIncrease
from stepscope.rules._host_rules import HostContention, MemoryPressure
from stepscope.rules._init_rule import MaxInitializationTime
from stepscope.rules._loader_rules import DataLoaderWorkers
from stepscope.rules._overhead_rules import PythonOverhead
from stepscope.rules._overlap_rules import CommunicationNotOverlapped, CopiesNotOverlapped
from stepscope.rules._params import did_you_mean
from stepscope.rules._step_rules import StepOutlier
from stepscope.rules._summary_rules import OverallFrameworkMetrics, OverallSystemUsage
from stepscope.rules._system_rules import BatchSize, CPUBottleneck, IOBottleneck, LowGPUUtilization
from stepscope.rules._thread_rules import CPUBoundThreads
from stepscope.rules.debugging import DEBUGGING_RULES
from stepscope.rules.straggler import Straggler

if TYPE_CHECKING:
    from stepscope.config import RuleAction

BUILTIN: dict[str, type[Rule]] = {
    c.name: c
    for c in (
        BatchSize,
        CommunicationNotOverlapped,
        CopiesNotOverlapped,
        CPUBottleneck,
        CPUBoundThreads,
        CUDAMemory,
        DataLoaderWorkers,
        DataLoading,
        FP32MatMul,
        GPUIdleBetweenSteps,
        GPUIdleInSteps,
        GPUMemoryIncrease,
        HostContention,
        IOBottleneck,
        LoadBalancing,
        LowGPUUtilization,
        MaxInitializationTime,
        MemoryPressure,
        OverallFrameworkMetrics,
        OverallSystemUsage,
        PythonOverhead,
        StepOutlier,
        Straggler,
        TorchCompile,
    )
}
PROFILER_RULES = tuple(sorted(BUILTIN))  # what ProfilerReport runs
BUILTIN.update(DEBUGGING_RULES)  # the debugging rules (tensors) run only when configured
PROFILER_REPORT = "ProfilerReport"
MAX_RULES = 20
ACTIONS = ("stop", "webhook", "command")  # "stop", or a table (config/_actions.py)
ENTRY_KEYS = ("name", "parameters", "rule_parameters", "actions", "source", "rule_to_invoke")


@dataclass(frozen=True)
class RuleSpec:
    """A configured rule and the actions taken when it fires: ``actions`` names them
    (``"stop"``), ``notify`` holds the webhooks and commands to send its findings to."""

    rule: Rule
    actions: tuple[str, ...] = ()
    notify: tuple[RuleAction, ...] = ()


def split_override(key: str) -> tuple[str, str]:
    """``"CPUBottleneck_cpu_threshold"`` -> ``("CPUBottleneck", "cpu_threshold")``."""
    for name in sorted(PROFILER_RULES, key=len, reverse=True):
        if key.startswith(name + "_"):
            return name, key[len(name) + 1 :]
    overrides = [f"{r}_{p.name}" for r in PROFILER_RULES for p in BUILTIN[r].declared()]
    raise RuleConfigError(
        f"Unknown ProfilerReport parameter {key!r}.{did_you_mean(key, overrides)} "
        "Expected <Rule>_<parameter> with a "
        f"built-in rule ({', '.join(sorted(BUILTIN))}), e.g. CPUBottleneck_cpu_threshold."
    )


def profiler_report(parameters: Mapping[str, object]) -> list[Rule]:
    """Every built-in rule, with ``<Rule>_<parameter>`` overrides applied."""
    per_rule: dict[str, dict[str, object]] = {}
    for key, value in parameters.items():
        name, param = split_override(key)
        per_rule.setdefault(name, {})[param] = value
    return [BUILTIN[name](name=None, **per_rule.get(name, {})) for name in PROFILER_RULES]


def load_custom(name: str, source: str, class_name: str, base_dir: str = ".") -> type[Rule]:
    """The class ``class_name`` of the Python file ``source`` (a Rule subclass)."""
    path = source if os.path.isabs(source) else os.path.join(base_dir, source)
    if not os.path.isfile(path):
        raise RuleConfigError(f"Custom rule {name}: source file {path!r} does not exist.")
    module_name = f"stepscope_custom_rule_{abs(hash(os.path.abspath(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise RuleConfigError(f"Custom rule {name}: cannot load {path!r} as a Python file.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Rule)):
        raise RuleConfigError(
            f"Custom rule {name}: {path} has no class {class_name!r} subclassing "
            "stepscope.rules.Rule. Fix rule_to_invoke, or subclass Rule."
        )
    return cls


def _entry_rules(entry: Mapping[str, object], base_dir: str) -> list[Rule]:
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        raise RuleConfigError(
            f"Unknown key {unknown[0]!r} in a rules entry. Valid keys: {', '.join(ENTRY_KEYS)}."
        )
    name = entry.get("name")
    given = entry.get("parameters") or entry.get("rule_parameters") or {}
    if not isinstance(name, str) or not name:
        raise RuleConfigError(f"A rules entry needs a 'name': {dict(entry)!r}.")
    if not isinstance(given, Mapping):
        raise RuleConfigError(
            f"The parameters of rule {name} must be a table/dict of values, not {given!r}."
        )
    params = {str(k): v for k, v in given.items()}
    if entry.get("source"):
        cls = load_custom(
            name, str(entry["source"]), str(entry.get("rule_to_invoke") or name), base_dir
        )
        return [cls(name=name, **params)]
    if name == PROFILER_REPORT:
        return profiler_report(params)
    if name not in BUILTIN:
        valid = ", ".join([PROFILER_REPORT, *sorted(BUILTIN)])
        raise RuleConfigError(
            f"Unknown rule {name!r}.{did_you_mean(name, [PROFILER_REPORT, *BUILTIN])} "
            f"Built-in rules: {valid}. A custom rule needs 'source' and 'rule_to_invoke'."
        )
    return [BUILTIN[name](**params)]


def _actions(
    entry: Mapping[str, object], rule: Rule
) -> tuple[tuple[str, ...], tuple[RuleAction, ...]]:
    """The names of the actions (``stop``) and the notifications of a rules entry."""
    given = entry.get("actions") or ()
    actions: tuple[object, ...]
    if isinstance(given, str | Mapping):
        actions = (given,)
    elif isinstance(given, Iterable):
        actions = tuple(given)
    else:
        raise RuleConfigError(
            f'The actions of rule {entry.get("name")} must be a list of "stop" and '
            f"webhook or command tables, not {given!r}."
        )
    if rule.parameters.get("stop_training_on_fire"):  # the seeds' StalledTrainingRule form
        actions = (*actions, "stop") if "stop" not in actions else actions
    names: list[str] = []
    notify: list[RuleAction] = []
    if actions:  # stepscope.config (tomllib, its tables: 10-20 ms) only for them
        from stepscope.config import parse_action
    for action in actions:
        try:
            parsed = parse_action(action, str(entry.get("name")))
        except ConfigError as exc:
            raise RuleConfigError(str(exc)) from None
        if isinstance(parsed, str):
            names.append(parsed)
        else:
            notify.append(parsed)
    return tuple(dict.fromkeys(names)), tuple(notify)


def build_rules(
    entries: Sequence[object] | None,
    overrides: Mapping[str, Mapping[str, object]] | None = None,
    base_dir: str = ".",
) -> list[RuleSpec]:
    """The rule set of ``entries`` (empty: ProfilerReport), with ``overrides`` per rule name.

    An explicit entry replaces the ProfilerReport member of the same name.
    """
    entries = list(entries or [{"name": PROFILER_REPORT}])
    if len(entries) > MAX_RULES:
        raise RuleConfigError(
            f"{len(entries)} rules configured; at most {MAX_RULES} rules per job "
            "(ProfilerReport counts as one). Remove some, or use ProfilerReport."
        )
    specs: dict[str, RuleSpec] = {}
    explicit_names: set[str] = set()
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise RuleConfigError(f"A rules entry must be a table/dict, not {entry!r}.")
        explicit = entry.get("name") != PROFILER_REPORT
        for rule in _entry_rules(entry, base_dir):
            name = rule.rule_name
            if explicit and name in explicit_names:
                raise RuleConfigError(f"Rule {name} is configured twice: keep one entry.")
            if explicit or name not in explicit_names:
                specs[name] = RuleSpec(rule, *_actions(entry, rule))
            if explicit:
                explicit_names.add(name)
    unknown = sorted(set(overrides or {}) - set(specs))
    if unknown:
        raise RuleConfigError(
            f"No rule {unknown[0]!r} in this rule set. Rules: {', '.join(sorted(specs))}."
        )
    return [_override(spec, overrides or {}) for spec in specs.values()]


def _override(spec: RuleSpec, overrides: Mapping[str, Mapping[str, object]]) -> RuleSpec:
    given = overrides.get(spec.rule.rule_name)
    if not given:
        return spec
    rule = spec.rule
    params = {**rule.parameters, **given}
    return dataclasses.replace(spec, rule=type(rule)(name=rule.rule_name, **params))
