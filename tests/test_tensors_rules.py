"""The debugging rules not covered by real training (tests/test_debug_rules.py), each on
tensors written through the agent's own TensorWriter: it fires on its problem and stays
silent without it, with the same parameters and having judged data (datapoints > 0)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import rules_data as rd
from rules_data import judge, silent
from stepscope.agent._faults import FaultBoundary
from stepscope.agent.tensors._writer import StepBatch, TensorWriter
from stepscope.rules import RuleResult, Status, build_rules

Raw = tuple[str, int, str, np.ndarray]  # phase, step, name, value
Scalar = tuple[str, int, str, float]


def write_job(
    path: Path,
    raws: Sequence[Raw] = (),
    floats: Sequence[Scalar] = (),
    members: dict[str, set[str]] | None = None,
) -> Path:
    """A finished job whose rank 0 saved ``raws`` and ``floats`` (one batch per step)."""
    store = rd.new_job(path, end=rd.T0 + 600)
    writer = TensorWriter(store, 0, FaultBoundary(store, {"rank": 0}))
    steps = sorted({(p, s) for p, s, *_ in [*raws, *floats]})
    for phase, step in steps:
        batch = StepBatch(time=rd.T0 + step, members=members or {})
        batch.raws = [
            (p, s, n, torch.from_numpy(np.ascontiguousarray(x)))
            for p, s, n, x in raws
            if (p, s) == (phase, step)
        ]
        batch.floats = [f for f in floats if (f[0], f[1]) == (phase, step)]
        writer.put(batch)
    writer.flush()
    return path


def fires(res: RuleResult) -> None:
    assert res.status is Status.ISSUES_FOUND, res
    assert res.findings and res.datapoints > 0 and res.findings[0].recommendation


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def weights(values: list[np.ndarray], name: str = "0.weight") -> list[Raw]:
    return [("train", 10 * i, name, v.astype(np.float32)) for i, v in enumerate(values)]


WEIGHTS = {"weights": {"0.weight"}}


def case(
    tmp_path: Path, rule: str, params: dict[str, Any], bad: dict[str, Any], good: dict[str, Any]
) -> None:
    fires(judge(write_job(tmp_path / "bad", **bad), rule, **params))
    silent(judge(write_job(tmp_path / "good", **good), rule, **params))


def test_all_zero(tmp_path: Path) -> None:
    w = rng().normal(size=(8, 4))
    case(
        tmp_path,
        "AllZero",
        {},
        {"raws": weights([np.zeros((8, 4))] * 2), "members": WEIGHTS},
        {"raws": weights([w, w * 0.9]), "members": WEIGHTS},
    )


def test_unchanged_tensor(tmp_path: Path) -> None:
    w = rng().normal(size=(8, 4))
    case(
        tmp_path,
        "UnchangedTensor",
        {"num_steps": 3},
        {"raws": weights([w, w, w]), "members": WEIGHTS},
        {"raws": weights([w, w * 0.99, w * 0.98]), "members": WEIGHTS},
    )


def test_tensor_variance_needs_its_thresholds_and_fires(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="min_threshold and max_threshold"):
        build_rules([{"name": "TensorVariance"}])
    params = {"min_threshold": 1e-4, "max_threshold": 10}
    case(
        tmp_path,
        "TensorVariance",
        params,
        {"raws": weights([rng().normal(0, 30, (16, 16))] * 2), "members": WEIGHTS},
        {"raws": weights([rng().normal(0, 1, (16, 16))] * 2), "members": WEIGHTS},
    )


def test_weight_update_ratio(tmp_path: Path) -> None:
    w = rng().normal(0, 0.1, (16, 16))
    step = rng(1).normal(0, 1e-4, (16, 16))
    case(
        tmp_path,
        "WeightUpdateRatio",
        {},
        {"raws": weights([w, w + 500 * rng(2).normal(size=w.shape)]), "members": WEIGHTS},
        {"raws": weights([w, w + step, w + 2 * step]), "members": WEIGHTS},
    )


def test_saturated_activation(tmp_path: Path) -> None:
    members = {"sigmoid_input": {"1_input_0"}, "tanh_input": {"3_input_0"}}
    normal = rng().normal(size=(64, 32))
    bad = [("train", 0, "1_input_0", normal + 40), ("train", 0, "3_input_0", normal)]
    good = [("train", 0, "1_input_0", normal), ("train", 0, "3_input_0", normal * 3)]
    case(
        tmp_path,
        "SaturatedActivation",
        {},
        {"raws": bad, "members": members},
        {"raws": good, "members": members},
    )
    # tanh saturates at +-9.5: the same inputs fire on the tanh layer
    path = write_job(tmp_path / "tanh", [("train", 0, "3_input_0", normal + 12)], [], members)
    res = judge(path, "SaturatedActivation")
    fires(res)
    assert res.findings[0].message.startswith("3_input_0")


def labelled(labels: np.ndarray) -> list[Raw]:
    """Labels and perfect predictions (logits) in batches of 100."""
    out: list[Raw] = []
    for i, y in enumerate(np.split(labels, len(labels) // 100)):
        out += [
            ("train", i, "CrossEntropyLoss_input_1", y.astype(np.int64)),
            ("train", i, "CrossEntropyLoss_input_0", np.eye(3, dtype=np.float32)[y]),
        ]
    return out


def test_class_imbalance(tmp_path: Path) -> None:
    members = {"labels": {"CrossEntropyLoss_input_1"}, "predictions": {"CrossEntropyLoss_input_0"}}
    skewed = np.array([0] * 580 + [1] * 10 + [2] * 10)
    balanced = np.tile([0, 1, 2], 200)
    case(
        tmp_path,
        "ClassImbalance",
        {},
        {"raws": labelled(rng().permutation(skewed)), "members": members},
        {"raws": labelled(balanced), "members": members},
    )


def losses(train: list[float], evals: list[float]) -> list[Scalar]:
    return [("train", i, "loss", v) for i, v in enumerate(train)] + [
        ("eval", i, "loss", v) for i, v in enumerate(evals)
    ]


LOSSES = {"losses": {"loss"}}


def test_overtraining(tmp_path: Path) -> None:
    falling = [2.0 * 0.9**i for i in range(15)]
    case(
        tmp_path,
        "Overtraining",
        {},
        {"floats": losses([1.0] * 15, [1.2] * 15), "members": LOSSES},
        {"floats": losses(falling, falling), "members": LOSSES},
    )


def test_poor_weight_initialization(tmp_path: Path) -> None:
    members = {"relu_input": {"0_relu_input", "2_relu_input"}, **LOSSES}
    x = rng().normal(size=(32, 16))
    falling = [2.0 * 0.9**i for i in range(10)]
    bad = [
        ("train", s, n, x * (100 if n.startswith("2") else 1))
        for s in range(3)
        for n in ("0_relu_input", "2_relu_input")
    ]
    good = [("train", s, n, x) for s in range(3) for n in ("0_relu_input", "2_relu_input")]
    case(
        tmp_path,
        "PoorWeightInitialization",
        {},
        {"raws": bad, "floats": losses(falling, []), "members": members},
        {"raws": good, "floats": losses(falling, []), "members": members},
    )


def test_stalled_training(tmp_path: Path) -> None:
    for name, gap in (("bad", 2000.0), ("good", 0.0)):
        store = rd.new_job(tmp_path / name, end=rd.T0 + 3000)
        first = rd.steps_frame(20)
        later = rd.steps_frame(20, start=float(first["end"].iloc[-1]) + gap)
        later["step"] += 20
        rd.write_steps(store, first)
        rd.write_steps(store, later)
        res = judge(tmp_path / name, "StalledTrainingRule")
        (fires if name == "bad" else silent)(res)


def test_stop_training_on_fire_is_the_stop_action() -> None:
    (spec,) = build_rules(
        [{"name": "StalledTrainingRule", "parameters": {"stop_training_on_fire": "True"}}]
    )
    assert spec.actions == ("stop",)
    (plain,) = build_rules([{"name": "StalledTrainingRule"}])
    assert plain.actions == ()


def noisy(curve: np.ndarray, seed: int = 0) -> list[float]:
    """``curve`` with 5 % minibatch noise (the healthy run of issue 19 rose 5.28% between
    two saved losses)."""
    return list(curve * (1.0 + rng(seed).normal(0.0, 0.05, len(curve))))


SAVED = np.arange(0, 1000, 10)  # losses saved every 10 steps
HEALTHY = noisy(0.3 + 2.0 * np.exp(-SAVED / 300.0))


def every_10(values: list[float]) -> list[Scalar]:
    return [("train", int(s), "loss", v) for s, v in zip(SAVED, values, strict=True)]


@pytest.mark.parametrize(
    ("problem", "values", "rising"),
    [
        ("stuck", noisy(np.full(len(SAVED), 1.2), seed=1), False),
        ("rising", noisy(1.0 + SAVED / 500.0, seed=2), True),
    ],
)
def test_loss_not_decreasing_on_smoothed_losses(
    tmp_path: Path, problem: str, values: list[float], rising: bool
) -> None:
    # The predecessor's single-loss comparison fires on the healthy run: a minibatch
    # loss above the one saved 10 steps before it.
    assert any(b >= a for a, b in itertools.pairwise(HEALTHY))
    bad = write_job(tmp_path / problem, floats=every_10(values), members=LOSSES)
    res = judge(bad, "LossNotDecreasing")
    fires(res)
    # Rising: a median more than increase_threshold_percent (5 %) above the one before.
    assert max(f.severity for f in res.findings) == (0.9 if rising else 0.6), res.message
    silent(
        judge(
            write_job(tmp_path / "healthy", floats=every_10(HEALTHY), members=LOSSES),
            "LossNotDecreasing",
        )
    )


def test_loss_not_decreasing_waits_for_two_medians(tmp_path: Path) -> None:
    res = judge(
        write_job(tmp_path / "j", floats=every_10(HEALTHY)[:15], members=LOSSES),
        "LossNotDecreasing",
    )
    assert res.status is Status.NOT_APPLICABLE
    assert res.reason == "waiting for 20 saved losses (two medians of 10); 15 so far"


def test_loss_not_decreasing_judges_tensors_by_regex(tmp_path: Path) -> None:
    floats = [
        ("train", s, "aux_loss", v) for _, s, _, v in every_10(noisy(np.full(len(SAVED), 1.0)))
    ]
    path = write_job(tmp_path / "j", floats=floats + every_10(HEALTHY), members=LOSSES)
    silent(judge(path, "LossNotDecreasing"))  # the loss of the losses collection: healthy
    res = judge(path, "LossNotDecreasing", tensor_regex="aux_.*")
    fires(res)
    assert "aux_loss" in res.message


def test_overtraining_on_noisy_losses(tmp_path: Path) -> None:
    """Rolling medians of 5 saved losses: a flat noisy loss is stale, a noisy falling
    one keeps improving (the best of single noisy losses is set by luck)."""
    s = np.arange(40)
    healthy = noisy(0.3 + 2.0 * np.exp(-s / 15.0), seed=0)
    flat = noisy(np.ones(len(s)), seed=0)
    case(
        tmp_path,
        "Overtraining",
        {},
        {"floats": losses(flat, noisy(np.full(len(s), 1.2), seed=1)), "members": LOSSES},
        {"floats": losses(healthy, noisy(0.4 + 2.0 * np.exp(-s / 15.0), 1)), "members": LOSSES},
    )
