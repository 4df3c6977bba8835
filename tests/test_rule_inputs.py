"""Rules whose input the configuration does not save are named when the job starts."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from stepscope.config import RULE_INPUTS, StepscopeConfig, missing_rule_inputs
from stepscope.rules.debugging import DEBUGGING_RULES


def _config(
    collections: list[Mapping[str, object]], rules: list[str], hook: Mapping[str, object] = {}
) -> dict[str, object]:
    debugger = {"collections": collections, "hook_parameters": dict(hook)}
    return StepscopeConfig.from_dict(
        {"debugger": debugger, "rules": [{"name": r} for r in rules]}
    ).to_dict()


def test_the_table_names_every_debugging_rule_and_the_collections_it_reads() -> None:
    assert set(RULE_INPUTS) == set(DEBUGGING_RULES)
    for name, rule in DEBUGGING_RULES.items():
        assert set(RULE_INPUTS[name]) == set(rule.collections), name


def test_vanishing_gradient_without_abs_mean_is_named_with_the_line_to_add() -> None:
    # tensors.md's own example: gradients as l2 and abs_max only
    grads = {"name": "gradients", "reductions": "l2, abs_max"}
    (line,) = missing_rule_inputs(_config([grads], ["VanishingGradient"]))
    assert line.startswith("VanishingGradient reads the abs_mean of gradients")
    assert 'name = "gradients", add "abs_mean": reductions = "l2, abs_max, abs_mean"' in line
    assert "\n" not in line


@pytest.mark.parametrize(
    "gradients",
    [
        {"name": "gradients", "reductions": "l2, abs_max, abs_mean"},
        {"name": "gradients", "reductions": "l2, abs_max", "save_raw_tensor": True},
        {"name": "gradients"},  # raw tensors: every reduction can be computed
    ],
)
def test_vanishing_gradient_with_its_input_saved_is_silent(gradients: dict[str, object]) -> None:
    assert missing_rule_inputs(_config([gradients], ["VanishingGradient"])) == []


def test_a_rule_reading_raw_tensors_asks_for_save_raw_tensor() -> None:
    weights = {"name": "weights", "reductions": "l2"}
    (line,) = missing_rule_inputs(_config([weights], ["WeightUpdateRatio"]))
    assert line.startswith("WeightUpdateRatio reads the raw tensors of weights")
    assert line.endswith('name = "weights", add save_raw_tensor = true.')
    raw = {**weights, "save_raw_tensor": True}
    assert missing_rule_inputs(_config([raw], ["WeightUpdateRatio"])) == []


def test_the_hooks_reductions_apply_to_the_rules_own_collections() -> None:
    lines = missing_rule_inputs(_config([], ["TensorVariance"], {"reductions": "l2"}))
    assert [w.split(" reads ")[1].split(",")[0] for w in lines] == [
        "the variance of weights",
        "the variance of gradients",
    ]
    assert missing_rule_inputs(_config([], ["TensorVariance"], {"reductions": "variance"})) == []


def test_rules_over_losses_and_profiler_rules_need_nothing_more() -> None:
    config = _config(
        [{"name": "losses", "reductions": "mean"}], ["LossNotDecreasing", "StepOutlier"]
    )
    assert missing_rule_inputs(config) == []
