"""Debugging rules on real training under `stepscope run`: each fires on its problem,
none fires on a healthy run, live and offline give the same verdicts, a rule can stop a job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stepscope
from conftest import SCRIPTS
from stepscope.rules import evaluate_job

TRAIN = str(SCRIPTS / "tensors_train.py")

pytestmark = pytest.mark.process
RULES = ("VanishingGradient", "ExplodingTensor", "LossNotDecreasing", "DeadRelu", "Overfit")

CONFIG = """
[debugger.hook_parameters]
save_interval = 5
[[debugger.collections]]
name = "losses"
save_interval = 1
""" + "".join(f'[[rules]]\nname = "{r}"\n' for r in RULES)

SCENARIOS = {
    # 12 sigmoid layers: the first layers' gradients are ~1e-12.
    "vanishing": (["--model", "sigmoid", "--steps", "30"], "VanishingGradient"),
    # MSE with a learning rate of 10: the loss overflows to inf, then NaN.
    "exploding": (["--task", "regress", "--lr", "10", "--steps", "30"], "ExplodingTensor"),
    # A learning rate of 0 on the full batch: the loss stays where it started.
    "stalled": (["--lr", "0", "--steps", "40", "--batch", "512"], "LossNotDecreasing"),
    # Biases of -100 before the ReLU: no unit ever activates.
    "dead-relu": (["--model", "deadrelu", "--steps", "30"], "DeadRelu"),
    # A wide network memorising 32 random labels; evaluated on other data.
    "overfit": (
        [
            "--model",
            "wide",
            "--n-data",
            "32",
            "--random-labels",
            "--adam",
            "--lr",
            "0.001",
            "--steps",
            "60",
            "--eval-every",
            "10",
        ],
        "Overfit",
    ),
}


def _config(tmp_path: Path, text: str = CONFIG) -> str:
    path = tmp_path / "stepscope.toml"
    path.write_text(text)
    return str(path)


def _statuses(job_path: Path) -> dict[str, str]:
    """The final statuses the live runner wrote into the job's rules/ folder."""
    files = (job_path / "rules").glob("*.json")
    return {p.stem: json.loads(p.read_text())["status"] for p in files}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_each_problem_fires_its_rule(run_job, tmp_path, scenario):
    args, rule = SCENARIOS[scenario]
    r = run_job([TRAIN, *args], "--config", _config(tmp_path))
    assert r.code == 0, r.stderr
    live = _statuses(r.job_path)
    assert set(live) == set(RULES)
    assert live[rule] == "IssuesFound", live
    offline = {res.rule: res for res in evaluate_job(stepscope.open(r.job_path))}
    assert {k: v.status.value for k, v in offline.items()} == live  # same runner, same verdicts
    assert offline[rule].findings and offline[rule].findings[0].recommendation
    assert json.loads((r.job_path / "rules" / f"{rule}.json").read_text())["findings"]


def test_healthy_run_fires_no_rule(run_job, tmp_path):
    r = run_job(
        [TRAIN, "--steps", "40", "--batch", "128", "--eval-every", "10"],
        "--config",
        _config(tmp_path),
    )
    assert r.code == 0, r.stderr
    assert _statuses(r.job_path) == dict.fromkeys(RULES, "NoIssuesFound")
    for rule in RULES:  # the same parameters as the firing runs, and data judged
        final = json.loads((r.job_path / "rules" / f"{rule}.json").read_text())
        assert final["datapoints"] > 0, (rule, final["message"])


def test_rules_enable_only_their_collections(run_job, tmp_path):
    config = '[[rules]]\nname = "DeadRelu"\n[debugger.hook_parameters]\nsave_interval = 5\n'
    r = run_job(
        [TRAIN, "--model", "deadrelu", "--steps", "12"], "--config", _config(tmp_path, config)
    )
    assert r.code == 0, r.stderr
    tensors = stepscope.open(r.job_path).tensors
    # DeadRelu's ReLU outputs (also listed in the built-in collection of their kind)
    # and the default losses; no weights, no gradients.
    assert set(tensors.collections()) == {"relu_output", "outputs", "default", "losses"}
    assert tensors.collections()["relu_output"] == ["1_output_0"]
    assert not any(n.startswith("gradient/") or n.endswith("weight") for n in tensors.names())
    assert _statuses(r.job_path)["DeadRelu"] == "IssuesFound"


def test_a_rule_stops_the_job(run_job, tmp_path):
    config = """
[debugger.hook_parameters]
save_interval = 1
[[rules]]
name = "ExplodingTensor"
actions = ["stop"]
"""
    args = [TRAIN, "--task", "regress", "--lr", "10", "--steps", "100000", "--step-sleep", "0.01"]
    r = run_job(args, "--config", _config(tmp_path, config))
    meta = stepscope.open(r.job_path).meta
    assert meta["status"] == "Stopped", r.stderr
    assert "rule ExplodingTensor fired" in meta["reason"]


def test_a_noisy_healthy_loss_saved_every_10_steps_is_not_flagged(run_job, tmp_path):
    """Minibatches of 16: the loss of one saved step is often above the one saved 10
    steps before it. Medians of 10 saved losses see it fall (issue 19, item 4)."""
    config = """
[[debugger.collections]]
name = "losses"
save_interval = 10
[[rules]]
name = "LossNotDecreasing"
"""
    r = run_job([TRAIN, "--steps", "250", "--batch", "16"], "--config", _config(tmp_path, config))
    assert r.code == 0, r.stderr
    final = json.loads((r.job_path / "rules" / "LossNotDecreasing.json").read_text())
    assert final["status"] == "NoIssuesFound" and final["datapoints"] > 0, final["message"]
    # The predecessor's comparison of two single saved losses (window = 1) flags it.
    job = stepscope.open(r.job_path)
    (single,) = evaluate_job(job, [{"name": "LossNotDecreasing", "parameters": {"window": 1}}])
    assert single.status.value == "IssuesFound"
