"""Trackers while the job trains: a real ``stepscope run`` logs its points and final
verdicts to MLflow (a file store in a temp folder) and W&B (offline), read back with
their own readers; a tracker that fails is a recorded fault, and the training's result
stays bit-for-bit the same."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import stepscope
from conftest import SCRIPTS, env_for_tests, stepscope_run
from mlflow_store import QUIET, training_mlflow_run
from wandb_log import logged

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("mlflow_quiet")]
mlflow_tracking = pytest.importorskip("mlflow.tracking")

MLP = str(SCRIPTS / "mlp.py")
GPU = "stepscope/gpu_utilization_pct"
CONFIG = """
[[rules]]
name = "DataLoading"
parameters = { threshold = 35 }  # a tiny model's own loader takes ~20% on a loaded machine
"""
STARVED = ["--steps", "40", "--slow-data", "0.02"]
HEALTHY = ["--steps", "60"]


def _config(tmp_path: Path) -> str:
    path = tmp_path / "stepscope.toml"
    path.write_text(CONFIG)
    return str(path)


def _mlflow_run(tmp_path: Path, args: list[str]) -> tuple[str, str, Path]:
    """A job under ``stepscope run`` with ``MLFLOW_RUN_ID`` set: (uri, run id, job)."""
    uri, _, run_id, mlflow_env = training_mlflow_run(tmp_path)
    env = env_for_tests(**mlflow_env)
    run = stepscope_run(tmp_path, [MLP, *args], "--config", _config(tmp_path), env=env)
    assert run.code == 0, run.stderr
    return uri, run_id, run.job_path


@pytest.mark.parametrize(("args", "status"), [(STARVED, "IssuesFound"), (HEALTHY, "NoIssuesFound")])
def test_mlflow_run_holds_the_live_points_and_the_final_verdict(
    tmp_path: Path, args: list[str], status: str
) -> None:
    uri, run_id, job = _mlflow_run(tmp_path, args)
    verdict = json.loads((job / "rules" / "DataLoading.json").read_text())
    assert verdict["status"] == status and verdict["datapoints"] > 0
    client = mlflow_tracking.MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)  # the training's run: stepscope logs into it
    assert run.info.status == "RUNNING"  # the user's to end: stepscope never does
    assert run.data.tags["stepscope.rule.DataLoading"] == status
    assert "stepscope.diagnosis" in run.data.tags
    history = client.get_metric_history(run_id, "stepscope.step_time_s")
    steps = [m.step for m in history]
    assert history and steps == sorted(steps) and steps[-1] == int(args[1]) - 1
    shares = [m.value for m in client.get_metric_history(run_id, "stepscope.data_wait_share")]
    assert (max(shares) > 0.5) == (status == "IssuesFound")
    assert not [f for f in stepscope.open(job).faults() if "export" in f["component"]]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _trained(tmp_path: Path, name: str, env: dict[str, str] | None, *opts: str) -> Path:
    saved = tmp_path / f"{name}.pt"
    args = [MLP, "--steps", "30", "--save", str(saved)]
    if env is None:  # bare: no stepscope
        subprocess.run([sys.executable, *args], check=True, capture_output=True,
                       env=env_for_tests())  # fmt: skip
        return saved
    run = stepscope_run(tmp_path / name, args, *opts, env=env)
    assert run.code == 0, run.stderr
    return saved


def _same_model(a: Path, b: Path) -> bool:
    x, y = torch.load(a), torch.load(b)
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def test_failing_trackers_are_faults_and_training_is_bit_identical(tmp_path: Path) -> None:
    port = _closed_port()
    env = env_for_tests(
        MLFLOW_TRACKING_URI=f"http://127.0.0.1:{port}",
        WANDB_MODE="online",
        WANDB_BASE_URL=f"http://127.0.0.1:{port}",
        WANDB_API_KEY="0" * 40,
        WANDB_DIR=str(tmp_path),
        WANDB_INIT_TIMEOUT="3",
        **QUIET,
    )
    bare = _trained(tmp_path, "bare", None)
    watched = _trained(tmp_path, "watched", env, "--mlflow", "--wandb")
    assert _same_model(bare, watched)
    faults = stepscope.open(tmp_path / "watched" / "job").faults()
    by = {f["component"]: f for f in faults}
    assert "export-mlflow" in by and "export-wandb" in by, faults
    assert "127.0.0.1" in by["export-mlflow"]["error"]


def _wandb_records(wandb_dir: Path) -> list[tuple[str, dict[str, object]]]:
    (path,) = wandb_dir.glob("wandb/offline-run-*/run-*.wandb")
    return logged(path)


def _summary(recs: list[tuple[str, dict[str, object]]]) -> dict[str, object]:
    merged: dict[str, object] = {}
    for kind, items in recs:
        if kind == "summary":
            merged.update(items)
    return merged


@pytest.mark.parametrize(("args", "status"), [(STARVED, "IssuesFound"), (HEALTHY, "NoIssuesFound")])
def test_wandb_offline_run_holds_the_live_points_and_the_final_verdict(
    tmp_path: Path, args: list[str], status: str
) -> None:
    pytest.importorskip("wandb")
    env = env_for_tests(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_RUN_ID="live42")
    run = stepscope_run(tmp_path, [MLP, *args], "--config", _config(tmp_path), env=env)
    assert run.code == 0, run.stderr
    verdict = json.loads((run.job_path / "rules" / "DataLoading.json").read_text())
    assert verdict["status"] == status and verdict["datapoints"] > 0
    recs = _wandb_records(tmp_path)
    history = [items for kind, items in recs if kind == "history"]
    steps = [h["stepscope/step"] for h in history]
    assert steps and steps == sorted(steps) and steps[-1] == int(args[1]) - 1
    assert all(float(h["stepscope/step_time_s"]) > 0 for h in history)  # type: ignore[arg-type]
    summary = _summary(recs)
    assert summary["stepscope/rule/DataLoading"] == status
    assert "stepscope/diagnosis" in summary


def test_wandb_export_of_a_finished_job(tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    from stepscope.testing import SyntheticJob, write_synthetic_job

    verdicts = [{"rule": "StepOutlier", "status": "IssuesFound", "triggers": 1,
                 "datapoints": 9, "cost_seconds": 3.5}]  # fmt: skip
    write_synthetic_job(str(tmp_path / "j"), SyntheticJob(name="j", gpus=1), verdicts)  # type: ignore[arg-type]
    env = env_for_tests(WANDB_MODE="offline", WANDB_DIR=str(tmp_path / "wb"))
    (tmp_path / "wb").mkdir()
    cmd = [sys.executable, "-m", "stepscope.cli", "export", "wandb", str(tmp_path / "j"),
           "--project", "p", "--run-id", "exp1"]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "W&B run exp1" in p.stdout
    recs = _wandb_records(tmp_path / "wb")
    history = [items for kind, items in recs if kind == "history"]
    assert 400 < len(history) <= 1000  # one per step of the 450 (under the cap)
    # a step with no sample inside it has no GPU value (missing, not zero)
    gpu = [float(h[GPU]) for h in history if GPU in h]  # type: ignore[arg-type]
    assert gpu and all(0 <= v <= 100 for v in gpu)
    summary = _summary(recs)
    assert summary["stepscope/rule/StepOutlier"] == "IssuesFound"
    assert summary["stepscope/rule/StepOutlier/cost_s"] == 3.5
    assert list((tmp_path / "wb").glob("wandb/offline-run-*/files/stepscope/report.html"))
