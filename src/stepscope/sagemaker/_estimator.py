"""Local estimators: ``PyTorch(...).fit()`` runs the entry point under stepscope here.

The estimator turns its arguments into one :class:`stepscope.config.StepscopeConfig`
(profiler, rules, debugger hook), writes it as the job's TOML file and runs
``stepscope run`` on the entry point; ``fit()`` waits for the job unless
``wait=False``. The platform's placement arguments (role, instance type, image,
versions, ...) are accepted and unused (docs/sagemaker.md).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence

from stepscope.config import (
    DEFAULT_OUTPUT,
    CollectionConfig,
    DebuggerHookConfig,
    JobConfig,
    ProfilerConfig,
    StepscopeConfig,
)
from stepscope.errors import ConfigError
from stepscope.sagemaker import _launch, _toml
from stepscope.sagemaker._estimator_args import check_extra, processes
from stepscope.sagemaker._hook import TensorBoardOutputConfig
from stepscope.sagemaker._job import LocalTrainingJob
from stepscope.sagemaker._live import LiveJobMethods
from stepscope.sagemaker._platform import output_root
from stepscope.sagemaker._rules import ProfilerRule, RuleBase


def _plain(profiler: ProfilerConfig) -> ProfilerConfig:
    """stepscope's own ProfilerConfig of ``profiler`` (the SDK-named subclass renames its
    arguments, so ``dataclasses.replace`` could not rebuild it)."""
    if not isinstance(profiler, ProfilerConfig):
        raise ConfigError(
            f"profiler_config={profiler!r}: give a ProfilerConfig (stepscope.sagemaker.debugger)."
        )
    fields = {f.name: getattr(profiler, f.name) for f in dataclasses.fields(profiler)}
    return ProfilerConfig(**fields)


def _rules_of(rules: Sequence[RuleBase] | None) -> list[RuleBase]:
    for rule in rules or []:
        if not isinstance(rule, RuleBase):
            raise ConfigError(
                f"rules=[...]: {rule!r} is not a rule. Fix: wrap it, e.g. "
                "ProfilerRule.sagemaker(rule_configs.CPUBottleneck()) or "
                "Rule.sagemaker(rule_configs.vanishing_gradient())."
            )
    return list(rules or [])


class Framework(LiveJobMethods):
    """What ``PyTorch`` and ``TensorFlow`` share: configuration, ``fit`` and the job."""

    framework = "framework"

    def __init__(
        self,
        entry_point: str,
        source_dir: str | None = None,
        hyperparameters: Mapping[str, object] | None = None,
        instance_count: int = 1,
        rules: Sequence[RuleBase] | None = None,
        profiler_config: ProfilerConfig | None = None,
        debugger_hook_config: DebuggerHookConfig | bool | None = None,
        tensorboard_output_config: TensorBoardOutputConfig | None = None,
        output_path: str | None = None,
        base_job_name: str | None = None,
        distribution: Mapping[str, object] | None = None,
        environment: Mapping[str, str] | None = None,
        disable_profiler: bool = False,
        **platform: object,
    ) -> None:
        check_extra(type(self).__name__, platform)
        self.source_dir = os.path.abspath(source_dir) if source_dir else None
        self.entry_point = self._entry(entry_point)
        self.hyperparameters = dict(hyperparameters or {})
        self.processes = processes(instance_count, distribution)
        self.rules = _rules_of(rules)
        self.profiler_config = _plain(profiler_config or ProfilerConfig())
        if disable_profiler:
            self.profiler_config = dataclasses.replace(self.profiler_config, disable_profiler=True)
        self.debugger_hook_config = debugger_hook_config
        self.tensorboard_output_config = tensorboard_output_config
        self.output_root = output_root(output_path, f"{type(self).__name__}(output_path)")
        self.base_job_name = base_job_name
        self.environment = dict(environment or {})
        self.config()  # every mistake now, before fit()

    def _entry(self, entry_point: str) -> str:
        path = os.path.join(self.source_dir or os.getcwd(), entry_point)
        if not os.path.isfile(path):
            where = f"in source_dir {self.source_dir}" if self.source_dir else "(no source_dir)"
            raise ConfigError(
                f"entry_point {entry_point!r} not found {where}. Fix: give the script's path, "
                "relative to source_dir when you give one."
            )
        return path

    # --- the configuration ---------------------------------------------------------

    def _rule_entries(self) -> list[dict[str, object]]:
        entries = [rule.to_entry() for rule in self.rules]
        profiler_rules = [r for r in self.rules if isinstance(r, ProfilerRule)]
        if not profiler_rules and not self.profiler_config.disable_profiler:
            entries.insert(0, {"name": "ProfilerReport"})  # the platform's default rule
        return entries

    def _hook(self) -> DebuggerHookConfig | None:
        hook = self.debugger_hook_config
        if hook is False or hook is None or hook is True:
            hook = DebuggerHookConfig() if hook is True else None
        extra: list[CollectionConfig] = [c for r in self.rules for c in r.collections_to_save]
        if not extra:
            return hook
        base = hook or DebuggerHookConfig()
        names = {c.name for c in base.collection_configs}
        added = tuple(c for c in dict((c.name, c) for c in extra).values() if c.name not in names)
        return dataclasses.replace(base, collection_configs=(*base.collection_configs, *added))

    def output(self) -> str:
        """Where job folders go: the profiler's or estimator's local path, else
        ``STEPSCOPE_OUTPUT``, else ``./stepscope-runs`` (made absolute: the job runs
        in ``source_dir``)."""
        given = self.profiler_config.output_path or self.output_root
        given = given or os.environ.get("STEPSCOPE_OUTPUT") or DEFAULT_OUTPUT
        return given if "://" in given else os.path.abspath(given)

    def config(self, job_name: str | None = None) -> StepscopeConfig:
        """The stepscope configuration of a ``fit()`` (the job's ``job.json`` holds it)."""
        profiler = dataclasses.replace(self.profiler_config, output_path=None)
        return StepscopeConfig(
            profiler=profiler,
            job=JobConfig(self.output(), job_name),
            rules=tuple(self._rule_entries()),
            debugger=self._hook(),
        )

    def job_name(self) -> str:
        base = self.base_job_name or f"{self.framework}-training"
        stamp = time.strftime("%Y-%m-%d-%H-%M-%S") + f"-{int(time.time() * 1000) % 1000:03d}"
        return f"{base}-{stamp}"

    # --- fit -----------------------------------------------------------------------

    def fit(
        self,
        inputs: object = None,
        wait: bool = True,
        logs: object = "All",
        job_name: str | None = None,
        experiment_config: object = None,
    ) -> None:
        """Run the entry point as a stepscope job; wait for it unless ``wait=False``."""
        chans = _launch.channels(inputs)
        name = job_name or self.job_name()
        cfg = self.config(name)
        output = cfg.job.output
        side = self._side_dir(output, name)
        config_file = os.path.join(side, "stepscope.toml")
        with open(config_file, "w", encoding="utf-8") as f:
            f.write(_toml.dumps(cfg.to_dict()))
        env = dict(os.environ)
        env.update(_launch.platform_env(self.hyperparameters, chans, side, self.processes))
        env.update(self.environment)
        script = [*_launch.script_command(self.entry_point), *_launch.hp_args(self.hyperparameters)]
        cmd = _launch.run_command(config_file, self.processes, script)
        cwd = self.source_dir or os.getcwd()
        process = subprocess.Popen(cmd, cwd=cwd, env=env)
        tensorboard = self.tensorboard_output_config
        logdir = tensorboard.local_dir if tensorboard is not None else None
        watched = not cfg.profiler.disable_profiler
        self.latest_training_job = LocalTrainingJob(name, output, process, side, logdir, watched)
        if wait:
            self.latest_training_job.wait(logs)

    @staticmethod
    def _side_dir(output: str, name: str) -> str:
        """``<output>/<name>.sagemaker``: the job's TOML file, model and output folders."""
        if "://" in output:
            return tempfile.mkdtemp(prefix=f"{name}.sagemaker-")
        side = os.path.join(output, f"{name}.sagemaker")
        os.makedirs(side, exist_ok=True)
        return side
