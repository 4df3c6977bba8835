"""Output tensors of compiled TensorFlow/Keras steps (issue 23 item 4): gradients and the
batch loss carried out of ``tf.function`` steps by side variables (agent/frameworks/
_tf_stash.py), judged by VanishingGradient as a PyTorch job's are.

The end-to-end tests train in subprocesses (tests/scripts/keras_fit.py, tf_loop.py) and
are skipped when TensorFlow is not installed: ``pip install -e '.[tensorflow]'``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import deque
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import stepscope
from conftest import SCRIPTS, env_for_tests, needs_tensorflow, stepscope_run
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import new_recorder
from stepscope.agent.frameworks._tf_hooks import TFHooks
from stepscope.agent.frameworks._tf_stash import GraphStash
from stepscope.agent.tensors._collections import resolve
from stepscope.agent.tensors._plans import SavePlanner

needs_tf = needs_tensorflow
FIT = str(SCRIPTS / "keras_fit.py")
LOOP = str(SCRIPTS / "tf_loop.py")
# The same rule parameters for the planted run and its healthy twin.
CONFIG = """
[debugger.hook_parameters]
save_interval = 10
[[debugger.collections]]
name = "losses"
save_interval = 1

[[rules]]
name = "VanishingGradient"
parameters = { threshold = 1e-7 }
"""


def test_by_default_a_trace_gets_no_gradient_side_variables() -> None:
    """Nothing asks for gradients: the stash adds nothing, and never imports TensorFlow
    for them (a gradient here would fail to convert if it tried)."""
    stash = GraphStash(SavePlanner(resolve({})))
    stash.keep_gradients([("gradient/dense/kernel", object())])
    assert stash.grads == {} and stash.written() == []
    wanted = GraphStash(SavePlanner(resolve({"rules": [{"name": "VanishingGradient"}]})))
    assert wanted.wants("gradient", "gradient/dense/kernel")
    assert not stash.wants("gradient", "gradient/dense/kernel")


class _BrokenStash:
    def keep_gradients(self, pairs: object) -> None:
        raise RuntimeError("planted fault in the gradients' stash")

    def keep_loss(self, kind: str, value: object) -> None:
        raise RuntimeError("planted fault in the loss's stash")


def test_a_fault_while_a_step_is_traced_is_recorded_and_the_step_goes_on() -> None:
    """The hooks that add the side variables run behind the fault boundary: a bug there
    is a fault of ``step-hooks``, and the optimizer's ``apply`` and the loss tracker's
    ``update_state`` still run, with what they were given."""
    faults = FaultBoundary(None, {})
    hooks = TFHooks(new_recorder(deque(maxlen=10)), faults)
    hooks._eager = lambda: False  # as while a tf.function is traced
    hooks.capture = SimpleNamespace(stash=_BrokenStash(), variables=(), armed=True)  # type: ignore[assignment]
    seen: list[object] = []
    apply = hooks._wrap_apply(lambda opt, grads, variables: seen.append(grads) or "applied")
    assert apply(object(), [1.0], [SimpleNamespace(path="dense/kernel")]) == "applied"
    hooks._keras_kind = "train"
    update = hooks._wrap_update_state(lambda metric, values: seen.append(values) or "updated")
    assert update(SimpleNamespace(name="loss"), 0.5) == "updated"
    assert seen == [[1.0], 0.5]
    assert set(faults.log.records) == {"step-hooks"}
    assert faults.log.records["step-hooks"]["count"] == 2


def _run(tmp: Path, job: str, script: str, *args: str) -> tuple[Path, dict[str, object]]:
    config = tmp / "grads.toml"
    config.write_text(CONFIG)
    run = stepscope_run(tmp, [script, *args], "--config", str(config), job=job)
    assert run.code == 0, run.stderr
    verdict = json.loads((run.job_path / "rules" / "VanishingGradient.json").read_text())
    return run.job_path, verdict


def _load(path: Path) -> list[np.ndarray]:
    with np.load(path) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


FIT_ARGS = ["--epochs", "1", "--batches", "40", "--seed", "3"]


@pytest.mark.process
@needs_tf
def test_vanishing_gradients_in_fit_fire_and_the_healthy_twin_trains_bit_for_bit(
    tmp_path: Path,
) -> None:
    planted, fired = _run(tmp_path, "sigmoid", FIT, *FIT_ARGS, "--deep", "sigmoid")
    assert fired["status"] == "IssuesFound", fired["message"]
    low = {f["message"].split(":")[0] for f in fired["findings"]}
    assert "gradient/sequential/dense/kernel" in low  # the first layer's
    assert "gradient/sequential/dense_6/kernel" not in low  # the output layer's is not

    logs, watched = tmp_path / "logs.jsonl", tmp_path / "watched.npz"
    more = ["--batch-logs", str(logs), "--save", str(watched)]
    healthy, silent = _run(tmp_path, "relu", FIT, *FIT_ARGS, "--deep", "relu", *more)
    assert silent["status"] == "NoIssuesFound", silent["message"]
    assert silent["datapoints"] == 14 * 4  # 7 layers' kernel and bias, steps 0/10/20/30

    # The gradients' side variables do not change the training: a bare run of the same
    # seed ends with the same weights, bit for bit.
    bare = tmp_path / "bare.npz"
    cmd = [sys.executable, FIT, *FIT_ARGS, "--deep", "relu", "--save", str(bare)]
    subprocess.run(cmd, check=True, capture_output=True, env=env_for_tests())
    a, b = _load(bare), _load(watched)
    assert len(a) == len(b) == 14
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))

    # The saved loss is each batch's, not Keras' running mean of the epoch: the
    # callbacks' logs give the means m_k, and batch k's loss is (k+1) m_k - k m_(k-1).
    means = np.array([json.loads(line)["loss"] for line in logs.read_text().splitlines()])
    batch = means * np.arange(1, 41) - np.r_[0.0, means[:-1] * np.arange(1, 40)]
    saved = stepscope.open(healthy).tensors.scalars(["loss"], "train").sort_values("step")
    assert list(saved["step"]) == list(range(40))
    np.testing.assert_allclose(saved["value"], batch, rtol=1e-4, atol=1e-5)
    assert not np.allclose(saved["value"][1:], means[1:], rtol=1e-3)
    assert not stepscope.open(planted).faults() and not stepscope.open(healthy).faults()


@pytest.mark.process
@needs_tf
@pytest.mark.parametrize(
    ("deep", "status"), [("sigmoid", "IssuesFound"), ("relu", "NoIssuesFound")]
)
def test_vanishing_gradients_in_a_compiled_custom_loop(
    tmp_path: Path, deep: str, status: str
) -> None:
    args = ["--compiled", "--steps", "30", "--deep", deep]
    job, verdict = _run(tmp_path, deep, LOOP, *args)
    assert verdict["status"] == status, verdict["message"]
    assert verdict["datapoints"] == 14 * 3  # steps 0, 10, 20
    grads = stepscope.open(job).tensors.collections()["gradients"]
    assert len(grads) == 14 and not stepscope.open(job).faults()
