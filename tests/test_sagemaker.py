"""stepscope.sagemaker's mapping onto stepscope's own model (no process started).

Each rule_configs name builds the registry's rule with the parameters given; bad
parameters, platform-only features and misplaced rules fail with a clear error.
"""

from __future__ import annotations

import os
import tomllib

import pytest

from stepscope import config
from stepscope.errors import ConfigError, RuleConfigError
from stepscope.rules import BUILTIN, DEBUGGING_RULES, build_rules
from stepscope.rules._registry import PROFILER_RULES
from stepscope.sagemaker import PlatformArgumentWarning, _launch, _toml
from stepscope.sagemaker.debugger import (
    CollectionConfig,
    DebuggerHookConfig,
    FrameworkProfile,
    Profiler,
    ProfilerConfig,
    ProfilerRule,
    Rule,
    TensorBoardOutputConfig,
    rule_configs,
)
from stepscope.sagemaker.pytorch import PyTorch

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")


def _a_parameter(name: str) -> tuple[str, float]:
    """A numeric parameter of rule ``name`` and a valid value other than its default."""
    for p in BUILTIN[name].declared():
        if p.kind in (int, float) and isinstance(p.default, int | float):
            return p.name, p.kind(p.default * 2 + 1)
    raise AssertionError(f"{name} has no numeric parameter")


def _built(rule: ProfilerRule | Rule):
    (spec,) = build_rules([rule.to_entry()])
    return spec


def test_rule_configs_names_every_builtin_rule():
    assert set(rule_configs.PROFILER_RULES) == {"ProfilerReport", *PROFILER_RULES}
    debugging = {f().rule_name for f in rule_configs.DEBUGGING_RULES.values()}
    assert debugging == set(DEBUGGING_RULES)


@pytest.mark.parametrize("name", sorted(PROFILER_RULES))
def test_a_profiler_rule_config_builds_our_rule_with_its_parameters(name):
    param, value = _a_parameter(name)
    spec = _built(ProfilerRule.sagemaker(rule_configs.PROFILER_RULES[name](**{param: str(value)})))
    assert type(spec.rule) is BUILTIN[name]
    assert spec.rule.parameters[param] == value  # the seeds' strings become numbers
    default = _built(ProfilerRule.sagemaker(rule_configs.PROFILER_RULES[name]()))
    assert default.rule.parameters[param] != value


@pytest.mark.parametrize("function", sorted(rule_configs.DEBUGGING_RULES))
def test_a_debugging_rule_config_builds_our_rule_with_rule_parameters(function):
    base = rule_configs.DEBUGGING_RULES[function]()
    required = {"min_threshold": 0.0, "max_threshold": 1.0} if function == "tensor_variance" else {}
    param, value = _a_parameter(base.rule_name)
    rule = Rule.sagemaker(base, rule_parameters={**required, param: value, "base_trial": "job"})
    spec = _built(rule)
    assert type(spec.rule) is DEBUGGING_RULES[base.rule_name]
    assert spec.rule.parameters[param] == value
    assert spec.actions == ()


def test_profiler_report_takes_rule_parameter_overrides():
    rule = ProfilerRule.sagemaker(rule_configs.ProfilerReport(CPUBottleneck_cpu_threshold=90))
    specs = {s.rule.rule_name: s.rule for s in build_rules([rule.to_entry()])}
    assert set(specs) == set(PROFILER_RULES)
    assert specs["CPUBottleneck"].parameters["cpu_threshold"] == 90


def test_a_bad_parameter_name_or_value_is_a_clear_error():
    with pytest.raises(RuleConfigError, match=r"'cpu_treshold'.*Valid parameters: cpu_threshold"):
        ProfilerRule.sagemaker(rule_configs.CPUBottleneck(cpu_treshold=90))
    with pytest.raises(RuleConfigError, match=r"'ninety'.*cpu_threshold.*expected a float"):
        ProfilerRule.sagemaker(
            rule_configs.CPUBottleneck(), rule_parameters={"cpu_threshold": "ninety"}
        )
    with pytest.raises(RuleConfigError, match="cpu_treshold"):
        ProfilerRule.sagemaker(rule_configs.ProfilerReport(CPUBottleneck_cpu_treshold=90))
    with pytest.raises(RuleConfigError, match="min_threshold"):
        Rule.sagemaker(rule_configs.tensor_variance())  # its thresholds have no default


def test_a_rule_in_the_wrong_class_says_which_class_to_use():
    with pytest.raises(ConfigError, match=r"profiler rule: use ProfilerRule\.sagemaker"):
        Rule.sagemaker(rule_configs.CPUBottleneck())
    with pytest.raises(ConfigError, match=r"debugging rule: use Rule\.sagemaker"):
        ProfilerRule.sagemaker(rule_configs.vanishing_gradient())
    with pytest.raises(ConfigError, match="needs a rule from rule_configs"):
        ProfilerRule.sagemaker("CPUBottleneck")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="leave name out"):
        ProfilerRule.sagemaker(rule_configs.StepOutlier(), name="my-outliers")


def test_actions_map_onto_stop_and_notifications_need_a_hook():
    actions = rule_configs.ActionList(rule_configs.StopTraining())
    rule = Rule.sagemaker(rule_configs.loss_not_decreasing(), actions=actions)
    assert rule.to_entry()["actions"] == ["stop"]
    assert _built(rule).actions == ("stop",)
    stalled = Rule.sagemaker(rule_configs.stalled_training_rule(stop_training_on_fire="True"))
    assert _built(stalled).actions == ("stop",)
    with pytest.raises(ConfigError, match=r"Email needs a hook.*webhook="):
        rule_configs.Email("me@example.com")
    with pytest.raises(ConfigError, match=r"SMS needs a hook.*command="):
        rule_configs.SMS("+15550100")
    mail = rule_configs.Email("me@example.com", webhook="http://127.0.0.1:9/h", kind="slack")
    sms = rule_configs.SMS(["+15550100"], command=["my-sms"])
    rule = Rule.sagemaker(
        rule_configs.loss_not_decreasing(),
        actions=rule_configs.ActionList(rule_configs.StopTraining(), mail, sms),
    )
    built = _built(rule)
    assert built.actions == ("stop",)
    webhook, command = built.notify
    assert (webhook.url, webhook.kind, webhook.to) == (
        "http://127.0.0.1:9/h",
        "slack",
        ("me@example.com",),
    )
    assert (command.command, command.to) == (("my-sms",), ("+15550100",))
    with pytest.raises(ConfigError, match="Accepted values are json, slack, teams"):
        rule_configs.Email("me@example.com", webhook="http://127.0.0.1:9/h", kind="pager")
    with pytest.raises(ConfigError, match="Valid actions"):
        rule_configs.ActionList("stop")  # type: ignore[arg-type]


def test_custom_rules_need_a_local_source(tmp_path):
    source = tmp_path / "my_rules.py"
    source.write_text(
        "from stepscope.rules import Rule\n"
        "class Slow(Rule):\n"
        "    def evaluate(self, data):\n"
        "        raise NotImplementedError\n"
    )
    rule = ProfilerRule.custom("Slow", "image", "ml.m5.xlarge", 30, str(source), "Slow")
    assert rule.to_entry()["source"] == str(source)
    with pytest.raises(ConfigError, match="local Python file"):
        ProfilerRule.custom("Slow", "image", "ml.m5.xlarge", 30, "s3://b/my_rules.py", "Slow")
    with pytest.raises(ConfigError, match="other_trials_s3_input_paths"):
        Rule.custom("X", other_trials_s3_input_paths=["s3://b/job"], source=str(source))


def test_profiler_config_takes_the_sdk_arguments(tmp_path):
    assert isinstance(ProfilerConfig(), config.ProfilerConfig)
    local = ProfilerConfig(s3_output_path=f"file://{tmp_path}", profiler_params=Profiler(60))
    assert local.output_path == str(tmp_path)
    assert local.profile_params == config.Profiler(60)
    with pytest.warns(PlatformArgumentWarning, match="STEPSCOPE_OUTPUT"):
        remote = ProfilerConfig(s3_output_path="s3://bucket/prefix")
    assert remote.output_path is None
    with pytest.raises(ConfigError, match="100, 200, 500"):
        ProfilerConfig(system_monitor_interval_millis=700)
    assert FrameworkProfile(local_path="/opt/ml/output/profiler").local_path is None
    assert FrameworkProfile(local_path=str(tmp_path)).local_path == str(tmp_path)


def test_hook_configs_take_the_sdk_defaults(tmp_path):
    hook = DebuggerHookConfig(
        s3_output_path="s3://b/t", collection_configs=[CollectionConfig("losses")]
    )
    assert isinstance(hook, config.DebuggerHookConfig)
    assert [c.name for c in hook.collection_configs] == ["losses"]
    assert DebuggerHookConfig().hook_parameters == {}
    assert TensorBoardOutputConfig("s3://b/tb", str(tmp_path)).local_dir == str(tmp_path)
    with pytest.raises(ConfigError, match="local folder"):
        _ = TensorBoardOutputConfig("s3://b/tb").local_dir


def test_hyperparameters_pass_as_the_platform_passes_them(tmp_path):
    hps = {"epochs": 3, "lr": 0.1, "name": "bert", "flag": True}
    assert _launch.hp_args(hps) == [
        "--epochs", "3", "--lr", "0.1", "--name", "bert", "--flag", "true",
    ]  # fmt: skip
    env = _launch.platform_env(hps, {"training": str(tmp_path)}, str(tmp_path / "side"), 1)
    assert env["SM_HP_EPOCHS"] == "3" and env["SM_HP_NAME"] == "bert"
    assert env["SM_CHANNEL_TRAINING"] == str(tmp_path)
    assert os.path.isdir(env["SM_MODEL_DIR"])
    with pytest.raises(ConfigError, match="download the data"):
        _launch.channels({"training": "s3://bucket/train"})


def _estimator(**kw: object) -> PyTorch:
    return PyTorch(entry_point="sm_train.py", source_dir=SCRIPTS, **kw)  # type: ignore[arg-type]


def test_the_estimator_config_round_trips_through_the_jobs_toml_file():
    est = _estimator(
        role="arn:aws:iam::1:role/x",
        instance_type="ml.p3.2xlarge",
        framework_version="2.0.0",
        rules=[
            Rule.sagemaker(
                rule_configs.vanishing_gradient(),
                collections_to_save=[CollectionConfig("gradients", {"save_interval": "2"})],
            )
        ],
        profiler_config=ProfilerConfig(framework_profile_params=FrameworkProfile(start_step=2)),
    )
    cfg = est.config("job-1")
    names = [r["name"] for r in cfg.rules]
    assert names == ["ProfilerReport", "VanishingGradient"]  # the platform's default rule
    assert cfg.debugger is not None and cfg.debugger.collection_configs[0].name == "gradients"
    text = _toml.dumps(cfg.to_dict())
    again = config.StepscopeConfig.from_dict(tomllib.loads(text))
    assert again.to_dict() == cfg.to_dict()


def test_estimator_arguments_are_checked_before_fit():
    with pytest.raises(ConfigError, match="Did you mean 'instance_type'"):
        _estimator(instance_typ="ml.p3.2xlarge")
    with pytest.raises(ConfigError, match="whole number >= 1"):
        _estimator(instance_count=0)
    with pytest.raises(ConfigError, match="torch_distributed"):
        _estimator(instance_count=2, distribution={"mpi": {"enabled": True}})
    with pytest.raises(ConfigError, match=r"entry_point 'nope\.py' not found"):
        PyTorch(entry_point="nope.py", source_dir=SCRIPTS)
    with pytest.raises(ConfigError, match=r"not a rule\. Fix: wrap it"):
        _estimator(rules=[rule_configs.CPUBottleneck()])
    with pytest.raises(ConfigError, match="stepscope rules JOB"):
        _estimator().update_profiler(rules=[ProfilerRule.sagemaker(rule_configs.StepOutlier())])
