"""DebuggerHookConfig / CollectionConfig: the seeds' form, TOML, errors, schedules."""

from __future__ import annotations

import pytest

from stepscope.agent.tensors import resolve
from stepscope.config import (
    CollectionConfig,
    ConfigError,
    DebuggerHookConfig,
    SaveConfig,
    StepscopeConfig,
    resolve_config,
)


def test_seed_form_with_string_values():
    hook = DebuggerHookConfig(
        s3_output_path="s3://bucket/tensors",
        collection_configs=[
            CollectionConfig(
                name="all",
                parameters={
                    "include_regex": (
                        ".*multiheadattentioncell0_output_1|.*key_output|.*query_output"
                    ),
                    "train.save_steps": "0",
                    "eval.save_interval": "10",
                },
            )
        ],
    )
    coll = hook.collection_configs[0]
    assert coll.schedule("train") == SaveConfig(save_steps=(0,))
    assert coll.schedule("eval").save_interval == 10
    assert DebuggerHookConfig.from_dict(hook.to_dict()) == hook


def test_toml_section(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("""
[debugger.hook_parameters]
save_interval = "50"
[[debugger.collections]]
name = "attention"
include_regex = ".*attn.*output|.*key_output|.*query_output"
"train.save_interval" = 100
"eval.save_interval" = 10
reductions = "max, abs_l2"
norms = ["l1"]
""")
    config = resolve_config(path)
    coll = config.debugger.collection_configs[0].with_defaults(config.debugger.hook_parameters)
    assert coll.schedule("train").save_interval == 100 and coll.reductions == (
        "max",
        "abs_l2",
        "l1",
    )
    assert StepscopeConfig.from_dict(config.to_dict()) == config
    names = {c.name for c in resolve(config.to_dict())}
    assert names == {"attention", "default"}  # the losses are always kept


@pytest.mark.parametrize(
    "params, message",
    [
        ({"save_intervall": 3}, "Did you mean 'save_interval'"),
        ({"reductions": "median"}, "Accepted values are min, max"),
        ({"include_regex": "("}, "valid Python regular expression"),
        ({"train.save_interval": "0"}, "whole numbers >= 1"),
    ],
)
def test_bad_parameters_say_what_to_fix(params, message):
    with pytest.raises(ConfigError, match=message):
        CollectionConfig("c", params)


def test_schedules():
    cfg = SaveConfig(save_interval=5, start_step=2, end_step=13)
    assert [s for s in range(20) if cfg.saves(s)] == [2, 7, 12]
    assert [s for s in range(9) if SaveConfig(save_steps=(0, 7)).saves(s)] == [0, 7]


def test_rules_enable_their_collections_with_their_regex():
    config = {
        "rules": [
            {"name": "DeadRelu", "parameters": {"tensor_regex": ".*act_output"}},
            {"name": "AllZero", "parameters": {"collection_names": "biases"}},
        ]
    }
    by_name = {c.name: c for c in resolve(config)}
    assert set(by_name) == {"default", "relu_output", "weights", "gradients", "biases"}
    assert by_name["relu_output"].selects("output", "block.act_output_0")
    assert not by_name["relu_output"].selects("output", "block.relu_output_0")


@pytest.mark.parametrize(
    "cfg",
    [
        SaveConfig(),
        SaveConfig(7, (), 3, 40),
        SaveConfig(1),
        SaveConfig(5, (2, 9, 30), 4, 31),
        SaveConfig(3, (), 0, 2),
    ],
)
def test_next_save_is_the_first_step_saves_accepts(cfg):
    # The capture arms its hooks from next_save: it must agree with saves() everywhere.
    for step in range(600):
        want = next((k for k in range(step, 2000) if cfg.saves(k)), None)
        assert cfg.next_save(step) == want, step
