"""Output tensors end to end: capture under `stepscope run`, storage, and the reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import stepscope
from conftest import SCRIPTS

TRAIN = str(SCRIPTS / "tensors_train.py")
MLP = str(SCRIPTS / "mlp.py")

pytestmark = pytest.mark.process


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "stepscope.toml"
    path.write_text(text)
    return str(path)


def test_default_saves_only_the_loss_every_500_steps(run_job):
    r = run_job([MLP, "--steps", "30", "--eval-every", "10"], "--no-rules")
    assert r.code == 0, r.stderr
    tensors = stepscope.open(r.job_path).tensors
    assert tensors.names() == ["CrossEntropyLoss_output_0", "loss"]
    assert tensors["loss"].steps() == [0]  # step 0 of 30: the next save is step 500
    assert tensors["loss"].steps("eval") == []
    assert tensors["CrossEntropyLoss_output_0"].steps() == [0]  # mlp.py evaluates no loss
    assert len(tensors.index()) == 0  # no raw tensor by default


EXACT = """
[[debugger.collections]]
name = "losses"
save_interval = 1
[[debugger.collections]]
name = "weights"
save_interval = 5
[[debugger.collections]]
name = "biases"
"train.save_steps" = "0,5"
[[debugger.collections]]
name = "gradients"
parameters = { "train.save_interval" = "5", "reductions" = "l2,mean", "save_raw_tensor" = "true" }
"""


@pytest.mark.parametrize(
    "variant",
    [[], ["--accum", "3", "--freeze-first", "--shared"]],
    ids=["plain", "accum-frozen-shared"],
)
def test_reader_returns_exactly_what_the_model_had(run_job, tmp_path, variant):
    rec_path = tmp_path / "rec.pt"
    args = [
        TRAIN,
        "--steps",
        "12",
        "--eval-every",
        "4",
        "--record",
        str(rec_path),
        "--record-steps",
        "0,5,10",
        "--scalars",
        *variant,
    ]
    r = run_job(args, "--no-rules", "--config", _config(tmp_path, EXACT))
    assert r.code == 0, r.stderr
    rec = torch.load(rec_path)
    tensors = stepscope.open(r.job_path).tensors
    loss = tensors["loss"]
    assert loss.steps("train") == list(range(12))
    assert [loss.value(s) for s in range(12)] == rec["loss"]
    evals = tensors["CrossEntropyLoss_output_0"].values("eval")
    assert list(evals.values()) == rec["eval_loss"] and len(evals) == r.result()["evals"]
    assert list(tensors["accuracy"].values().values()) == rec["scalars"]
    for (name, step), want in rec["weights"].items():
        if step == 10 and name.endswith("bias"):
            assert step not in tensors[name].steps()  # biases: steps 0 and 5 only
            continue
        np.testing.assert_array_equal(tensors[name].value(step), want.numpy())
    for (name, step), want in rec["grads"].items():
        grad = tensors[f"gradient/{name}"]
        np.testing.assert_array_equal(grad.value(step), want.numpy())
        assert grad.reduction(step, "l2") == pytest.approx(float(want.norm()), rel=1e-6)
        assert grad.reduction(step, "abs_max") == float(want.abs().max())  # from the raw
    grads = {n for n in tensors.names() if n.startswith("gradient/")}
    assert grads == {f"gradient/{n}" for n, _ in rec["grads"]}
    if "--freeze-first" in variant:  # frozen: its weight is saved, it has no gradient
        assert "0.weight" in tensors.names() and "gradient/0.weight" not in grads
    if "--shared" in variant:  # the shared layer appears once, under its first name
        assert "2.weight" in tensors.names() and "4.weight" not in tensors.names()
    assert not (r.job_path / "faults").exists()


def test_regex_collection_reductions_only_and_module_phases(run_job, tmp_path):
    config = """
[debugger.hook_parameters]
save_interval = 4
[[debugger.collections]]
name = "relus"
include_regex = ".*relu_output"
reductions = ["max", "abs_mean"]
"eval.save_interval" = 1
[[debugger.collections]]
name = "optimizer_variables"
"""
    args = [TRAIN, "--steps", "9", "--eval-every", "3", "--adam"]
    r = run_job(args, "--no-rules", "--config", _config(tmp_path, config))
    assert r.code == 0, r.stderr
    tensors = stepscope.open(r.job_path).tensors
    relu = tensors["1_output_0"]  # nn.ReLU at index 1, selected by its type
    assert relu.steps("train") == [4, 8]  # modules are known from the first step on
    assert relu.steps("eval") == list(range(r.result()["evals"]))
    assert relu.reduction(4, "max") >= 0 and set(relu.reductions(4)) == {"max", "abs_mean"}
    with pytest.raises(KeyError, match="only reductions"):
        relu.value(4)
    assert tensors.collections()["relus"] == ["1_output_0", "3_output_0"]
    assert "optimizer/0.weight/exp_avg" in tensors.names()
    assert tensors["optimizer/lr/group0"].value(0) == 0.1
    assert "loss" in tensors.names()  # the default losses are kept beside the config
