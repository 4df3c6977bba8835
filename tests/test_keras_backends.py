"""Keras 3 on its PyTorch backend under ``stepscope run``: real training in subprocesses,
an unchanged ``fit`` script (tests/scripts/keras_backend_fit.py) that imports no
TensorFlow. Keras owns the steps (its step functions) and the loss (its logs); the
torch adapter keeps ``backward()`` and the DataLoader Keras iterates; neither counts a
step or a forward twice (docs/tensorflow.md, "Keras on JAX and PyTorch").

Skipped when Keras or torch is not installed: ``pip install -e '.[torch,tensorflow]'``.
The JAX backend was checked by hand (docs/tensorflow.md): jax is not a test dependency.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stepscope
from conftest import SCRIPTS, env_for_tests, stepscope_run

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        importlib.util.find_spec("keras") is None or importlib.util.find_spec("torch") is None,
        reason="Keras or torch is not installed: pip install -e '.[torch,tensorflow]'",
    ),
]

FIT = str(SCRIPTS / "keras_backend_fit.py")
TORCH = {"KERAS_BACKEND": "torch"}
GRADIENTS = """
[debugger.hook_parameters]
save_interval = 10
[[debugger.collections]]
name = "gradients"
reductions = "l2"
"""


def _events(job: stepscope.Job, kind: str) -> list[dict[str, object]]:
    ev = job.events()
    return [json.loads(d) for d in ev[ev["kind"] == kind]["detail"]]


@pytest.fixture(scope="module")
def torch_fit(tmp_path_factory: pytest.TempPathFactory) -> stepscope.Job:
    tmp = tmp_path_factory.mktemp("keras-torch")
    config = tmp / "stepscope.toml"
    config.write_text(GRADIENTS)
    opts = ("--no-rules", "--config", str(config))
    run = stepscope_run(tmp, [FIT, "--validate"], *opts, env=env_for_tests(**TORCH))
    assert run.code == 0, run.stderr
    return stepscope.open(run.job_path)


def test_fit_on_torch_records_one_step_per_batch_split_in_parts(torch_fit: stepscope.Job) -> None:
    steps = torch_fit.steps()
    # 2 epochs of 20 batches; validation 2 batches an epoch, then an evaluate of 3.
    # A torch forward hook on Keras' model (a torch module) would count each twice,
    # and Keras' build of the model on fake inputs would add an evaluation step.
    assert (steps["phase"] == "train").sum() == 40
    assert (steps["phase"] == "eval").sum() == 2 * 2 + 3
    train = steps[steps["phase"] == "train"]
    # eager steps: Model.__call__, torch's backward(), Keras' apply, the DataLoader
    assert (train[["data_wait", "forward", "backward", "optimizer"]] > 0).all().all()
    assert (train["other"] >= 0).all()  # no part counted twice
    evals = steps[steps["phase"] == "eval"]
    assert (evals["forward"] > 0).all() and (evals["backward"] == 0).all()
    epochs = _events(torch_fit, "epoch_end")
    assert [(e["epoch"], e["train_steps"]) for e in epochs] == [(0, 20), (1, 40)]
    assert not torch_fit.faults()


def test_the_framework_events_name_kerass_backend(torch_fit: stepscope.Job) -> None:
    frameworks = {e["name"]: e for e in _events(torch_fit, "framework")}
    # the script imports no TensorFlow, and neither does the agent
    assert frameworks.keys() == {"torch", "keras"}
    assert frameworks["keras"]["backend"] == "torch" and frameworks["keras"]["version"]
    assert "backend" not in frameworks["torch"]


def test_the_loss_and_metrics_come_from_kerass_logs_once(torch_fit: stepscope.Job) -> None:
    tensors = torch_fit.tensors
    assert tensors.collections()["losses"] == ["loss"]
    assert "accuracy" in tensors.collections()["metrics"]
    loss = tensors.scalars()
    loss = loss[loss["name"] == "loss"]
    assert set(loss["phase"]) == {"train", "eval"} and np.isfinite(loss["value"]).all()
    # one value per saved step: torch's backward hook stands back inside Keras' step
    assert not loss.duplicated(["phase", "step"]).any()


def test_gradients_are_taken_at_kerass_apply(torch_fit: stepscope.Job) -> None:
    tensors = torch_fit.tensors
    names = tensors.collections()["gradients"]
    assert "gradient/sequential/dense/kernel" in names and len(names) == 4  # 2 kernels, 2 biases
    grad = tensors["gradient/sequential/dense/kernel"]
    assert grad.steps() == [0, 10, 20, 30] and grad.reduction(10, "l2") > 0


def _weights(tmp_path: Path, name: str, watched: bool, *args: str) -> list[np.ndarray]:
    out = tmp_path / f"{name}.npz"
    env = env_for_tests(**TORCH)
    if watched:  # gradients and weights read on saving steps too
        config = tmp_path / "stepscope.toml"
        config.write_text(GRADIENTS)
        opts = ("--no-rules", "--config", str(config))
        run = stepscope_run(tmp_path, [*args, "--save", str(out)], *opts, job=name, env=env)
        assert run.code == 0, run.stderr
    else:
        cmd = [sys.executable, *args, "--save", str(out)]
        subprocess.run(cmd, check=True, capture_output=True, env=env)
    with np.load(out) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


# Breaks the recorder the Keras hooks call: every forward end raises inside stepscope.
BROKEN = """
import runpy, sys
from stepscope.agent import bootstrap
def boom(*a):
    raise RuntimeError("planted fault in a Keras hook")
bootstrap.current().recorder.on_forward_end = boom
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_watched_and_broken_fit_on_torch_train_bit_for_bit_as_bare(tmp_path: Path) -> None:
    bare = _weights(tmp_path, "bare", False, FIT, "--seed", "3")
    watched = _weights(tmp_path, "watched", True, FIT, "--seed", "3")
    broken = tmp_path / "broken.py"
    broken.write_text(BROKEN)
    faulty = _weights(tmp_path, "faulty", True, str(broken), FIT, "--seed", "3")
    assert len(bare) == len(watched) == len(faulty) > 0
    assert all(np.array_equal(a, b) for a, b in zip(bare, watched, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(bare, faulty, strict=True))
    assert not stepscope.open(tmp_path / "watched").faults()
    faults = stepscope.open(tmp_path / "faulty").faults()
    hook = [f for f in faults if f["component"] == "step-hooks"]
    assert hook and "planted fault" in hook[0]["error"] and hook[0]["count"] >= 20
