"""TensorFlow and Keras 3 under ``stepscope run``: real training in subprocesses, unchanged
scripts (tests/scripts/keras_fit.py, tf_loop.py), the same job folder and rules as torch's.

Skipped when TensorFlow is not installed: ``pip install -e '.[tensorflow]'``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests, needs_tensorflow, stepscope_run

pytestmark = [
    pytest.mark.process,
    needs_tensorflow,
]

FIT = str(SCRIPTS / "keras_fit.py")
LOOP = str(SCRIPTS / "tf_loop.py")
CONFIG = """
[debugger.hook_parameters]
save_interval = 5
[[debugger.collections]]
name = "losses"
save_interval = 1

[[rules]]
name = "StepOutlier"
parameters = { n_outliers = 0, min_excess_s = 1.0 }  # a 3 s stall; ignore hiccups

[[rules]]
name = "DataLoading"
parameters = { threshold = 35 }

[[rules]]
name = "ExplodingTensor"
"""
RULES = ("StepOutlier", "DataLoading", "ExplodingTensor")


def _events(job: stepscope.Job, kind: str) -> list[dict[str, object]]:
    ev = job.events()
    return [json.loads(d) for d in ev[ev["kind"] == kind]["detail"]]


def _rules(tmp_path: Path, script: str, *args: str) -> dict[str, dict[str, object]]:
    """The final verdicts of RULES on a run of ``script``; ``fit`` runs one epoch of 80
    batches (an epoch's end takes 0.3-1.5 s here: an outlier of its own)."""
    config = tmp_path / "stepscope.toml"
    config.write_text(CONFIG)
    shape = ["--epochs", "1", "--batches", "80"] if script == FIT else ["--compiled"]
    run = stepscope_run(tmp_path, [script, *shape, *args], "--config", str(config))
    assert run.code == 0, run.stderr
    folder = run.job_path / "rules"
    return {r: json.loads((folder / f"{r}.json").read_text()) for r in RULES}


@pytest.fixture(scope="module")
def fit_job(tmp_path_factory: pytest.TempPathFactory) -> stepscope.Job:
    tmp = tmp_path_factory.mktemp("fit")
    run = stepscope_run(tmp, [FIT, "--validate", "--epochs", "2", "--batches", "20"], "--no-rules")
    assert run.code == 0, run.stderr
    return stepscope.open(run.job_path)


def test_fit_steps_are_train_batches_and_eval_predict_batches(fit_job: stepscope.Job) -> None:
    steps = fit_job.steps()
    # 2 epochs of 20 batches; validation 4 batches per epoch, then a predict of 3
    assert (steps["phase"] == "train").sum() == 40
    assert (steps["phase"] == "eval").sum() == 2 * 4 + 3
    train = steps[steps["phase"] == "train"]
    assert (train["forward"] > 0).all()  # the compiled train function
    assert (train["backward"] == 0).all() and (train["optimizer"] == 0).all()  # fused in it
    names = {e["name"]: e["version"] for e in _events(fit_job, "framework")}
    assert names.keys() == {"tensorflow", "keras"} and all(names.values())
    epochs = _events(fit_job, "epoch_end")
    assert [(e["epoch"], e["train_steps"]) for e in epochs] == [(0, 20), (1, 40)]
    assert not fit_job.faults()


def test_fit_keeps_loss_and_metrics(fit_job: stepscope.Job) -> None:
    tensors = fit_job.tensors
    assert tensors.collections()["losses"] == ["loss"]
    assert "accuracy" in tensors.collections()["metrics"]
    loss = tensors.scalars()
    assert set(loss["phase"]) == {"train", "eval"} and np.isfinite(loss["value"]).all()


def test_show_and_report_work_on_a_tensorflow_job(fit_job: stepscope.Job, tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(BIN / "stepscope"), *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env_for_tests())

    show = cli("show", str(fit_job.path))
    assert show.returncode == 0 and "40" in show.stdout, show.stderr
    out = tmp_path / "report.html"
    report = cli("report", str(fit_job.path), "-o", str(out))
    assert report.returncode == 0, report.stderr
    assert out.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("compiled", "wrapped"),
    [(False, False), (True, False), (False, True)],
    ids=["eager", "tf.function", "eager-loss-scale"],
)
def test_custom_loop_counts_one_step_per_apply(
    tmp_path: Path, compiled: bool, wrapped: bool
) -> None:
    args = [LOOP, "--steps", "30", *(["--compiled"] if compiled else [])]
    args += ["--loss-scale"] if wrapped else []
    run = stepscope_run(tmp_path, args, "--no-rules")
    assert run.code == 0, run.stderr
    job = stepscope.open(run.job_path)
    steps = job.steps(phase="train")
    assert len(steps) == 30 and (steps["data_wait"] > 0).all()
    if compiled:  # one compiled function: forward, gradients and update fused
        assert (steps["forward"] > 0).all() and (steps["backward"] == 0).all()
    else:  # eager: each part timed where it runs
        assert (steps[["forward", "backward", "optimizer"]] > 0).all().all()
    assert job.tensors.collections()["losses"] == ["loss"]
    assert not job.faults()


def _weights(tmp_path: Path, name: str, watched: bool, *args: str) -> list[np.ndarray]:
    out = tmp_path / f"{name}.npz"
    if watched:
        run = stepscope_run(tmp_path, [*args, "--save", str(out)], "--no-rules", job=name)
        assert run.code == 0, run.stderr
    else:
        subprocess.run(
            [sys.executable, *args, "--save", str(out)],
            check=True,
            capture_output=True,
            env=env_for_tests(),
        )
    with np.load(out) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


FIT_ONCE = (FIT, "--seed", "3", "--epochs", "1")  # the bare fit both tests below compare with


@pytest.fixture(scope="module")
def bare_fit(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    """The weights of ``FIT_ONCE`` without stepscope, trained once for the module."""
    return _weights(tmp_path_factory.mktemp("bare-fit"), "bare", False, *FIT_ONCE)


@pytest.mark.parametrize("script", [FIT, LOOP], ids=["fit", "loop"])
def test_watched_training_is_bit_for_bit_the_bare_one(
    tmp_path: Path, script: str, request: pytest.FixtureRequest
) -> None:
    if script == FIT:
        bare, args = request.getfixturevalue("bare_fit"), FIT_ONCE
    else:
        args = (script, "--seed", "3")
        bare = _weights(tmp_path, "bare", False, *args)
    watched = _weights(tmp_path, "watched", True, *args)
    assert len(bare) == len(watched) > 0
    assert all(np.array_equal(a, b) for a, b in zip(bare, watched, strict=True))


# Runs the script after breaking the recorder the TensorFlow hooks call: every
# forward end raises inside stepscope. Training must not notice.
BROKEN = """
import os, runpy, sys
from stepscope.agent import bootstrap
def boom(*a):
    raise RuntimeError("planted fault in a TensorFlow hook")
bootstrap.current().recorder.on_forward_end = boom
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # as `python script.py` does
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_fault_in_a_tensorflow_hook_is_recorded_and_training_goes_on(
    tmp_path: Path, bare_fit: list[np.ndarray]
) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text(BROKEN)
    watched = _weights(tmp_path, "watched", True, str(broken), *FIT_ONCE)
    bare = bare_fit
    assert len(bare) == len(watched) > 0 and all(
        np.array_equal(a, b) for a, b in zip(bare, watched, strict=True)
    )
    faults = stepscope.open(tmp_path / "watched").faults()
    hook = [f for f in faults if f["component"] == "step-hooks"]
    assert hook and "planted fault" in hook[0]["error"] and hook[0]["count"] >= 20


# -- the planted problems of the PyTorch tests, in their TensorFlow versions --------------
def test_a_stall_in_fit_fires_step_outlier(tmp_path: Path) -> None:
    results = _rules(tmp_path, FIT, "--stall-at", "25", "--stall", "3")
    outlier = results["StepOutlier"]
    assert outlier["status"] == "IssuesFound"
    # The sleep follows batch 25 (a callback): the next step pays it.
    assert [f["steps"][0] for f in outlier["findings"]] == [26]


def test_a_starved_input_pipeline_fires_data_loading(tmp_path: Path) -> None:
    results = _rules(tmp_path, LOOP, "--slow-data", "0.03")
    assert results["DataLoading"]["status"] == "IssuesFound"


def test_a_nan_loss_in_fit_fires_exploding_tensor(tmp_path: Path) -> None:
    results = _rules(tmp_path, FIT, "--nan-from", "20")
    assert results["ExplodingTensor"]["status"] == "IssuesFound"
    assert "from step 20" in results["ExplodingTensor"]["message"]


@pytest.mark.parametrize("script", [FIT, LOOP], ids=["fit", "loop"])
def test_healthy_tensorflow_runs_fire_nothing(tmp_path: Path, script: str) -> None:
    for name, result in _rules(tmp_path, script).items():
        assert result["status"] == "NoIssuesFound", (name, result["message"])
        assert result["datapoints"] > 0


PROFILE = """
[profiler.framework_profile_params.detailed_profiling_config]
start_step = 10
num_steps = 3
"""
# Parses the window's XSpace protobuf as TensorBoard's profile plugin does (in a
# subprocess: TensorFlow stays out of the test process).
PARSE = """
import sys
from tensorflow.tsl.profiler.protobuf import xplane_pb2
x = xplane_pb2.XSpace()
x.ParseFromString(open(sys.argv[1], "rb").read())
print(sum(len(line.events) for p in x.planes for line in p.lines))
"""


def test_a_detailed_window_runs_tensorflows_profiler(tmp_path: Path) -> None:
    config = tmp_path / "profile.toml"
    config.write_text(PROFILE)
    args = [FIT, "--epochs", "1", "--batches", "30"]
    run = stepscope_run(tmp_path, args, "--no-rules", "--config", str(config))
    assert run.code == 0, run.stderr
    folder = run.job_path / "profiling" / "rank-0"
    record = json.loads((folder / "detailed-10-12.window.json").read_text())
    assert record["viewer"] == "tensorboard-plugin-profile" and record["bytes"] > 0
    xplane = run.job_path / record["path"]
    assert xplane.name.endswith(".xplane.pb") and "/plugins/profile/" in record["path"]
    out = subprocess.run(
        [sys.executable, "-c", PARSE, str(xplane)],
        capture_output=True,
        text=True,
        check=True,
        env=env_for_tests(),
    )
    assert int(out.stdout.strip().splitlines()[-1]) > 100  # host events of 3 steps
    steps = stepscope.open(run.job_path).steps(phase="train")
    assert steps.set_index("step").loc[10:12, "profiled"].all()


TENSORS = """
[debugger.hook_parameters]
save_interval = 10

[[debugger.collections]]
name = "gradients"
reductions = "l2, abs_max"

[[debugger.collections]]
name = "kernels"
include_regex = ".*kernel"
"""


def test_weights_and_gradients_by_collection_and_regex(tmp_path: Path) -> None:
    config = tmp_path / "tensors.toml"
    config.write_text(TENSORS)
    args = [LOOP, "--steps", "30", "--hidden", "16"]
    run = stepscope_run(tmp_path, args, "--no-rules", "--config", str(config))
    assert run.code == 0, run.stderr
    tensors = stepscope.open(run.job_path).tensors
    coll = tensors.collections()
    # Keras variable paths; the regex selects among every kind (gradients too)
    weights = ["sequential/dense/kernel", "sequential/dense_1/kernel"]
    assert coll["kernels"] == sorted([*weights, *(f"gradient/{w}" for w in weights)])
    assert len(coll["gradients"]) == 4 and all(n.startswith("gradient/") for n in coll["gradients"])
    kernel = tensors[weights[0]]
    assert kernel.steps() == [0, 10, 20]
    assert np.asarray(kernel.value(0)).shape == (256, 16)  # raw: the first Dense's kernel
    grad = tensors["gradient/sequential/dense/kernel"]
    assert grad.reduction(10, "l2") > 0 and set(grad.reductions(10)) == {"l2", "abs_max"}


def test_the_dashboard_api_serves_a_tensorflow_job(fit_job: stepscope.Job) -> None:
    from starlette.testclient import TestClient

    from stepscope.dashboard import create_app

    token = "t" * 24
    root = str(Path(fit_job.path).parent)
    name = Path(fit_job.path).name
    auth = {"Authorization": f"Bearer {token}"}
    # as a context: its event loop and worker threads end with the block
    with TestClient(create_app(root, token=token), base_url="http://127.0.0.1") as client:
        steps = client.get(f"/api/jobs/{name}/steps", headers=auth)
        report = client.get(f"/api/jobs/{name}/report.html", headers=auth)
    assert steps.status_code == 200 and steps.json()["count"] == 40
    assert report.status_code == 200 and b"<html" in report.content
