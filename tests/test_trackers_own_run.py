"""Live trackers beside a training that logs to its own run. W&B: stepscope logs to a
run of its own and leaves the training's exactly as the training left it; MLflow:
stepscope adds its ``stepscope.*`` keys to the training's run and changes nothing
the training wrote, nor the run's status. A real
``stepscope run`` of tests/scripts/tracked_train.py, with W&B offline (its ``.wandb``
files read back) and an MLflow file store in a temp folder (read with MlflowClient)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import stepscope
from conftest import SCRIPTS, env_for_tests, stepscope_run
from mlflow_store import training_mlflow_run
from wandb_log import logged, run_records

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("mlflow_quiet")]
pytest.importorskip("mlflow.tracking")

TRAIN = str(SCRIPTS / "tracked_train.py")
STEPS = 40


def _train(tmp_path: Path, tracker: str, env: dict[str, str]) -> dict[str, object]:
    """The training under ``stepscope run --<tracker>``; what it says it left."""
    record = tmp_path / "left.json"
    args = [TRAIN, "--tracker", tracker, "--record", str(record), "--steps", str(STEPS)]
    run = stepscope_run(tmp_path, args, f"--{tracker}", env=env, timeout=300)
    assert run.code == 0, run.stderr
    assert not [f for f in stepscope.open(run.job_path).faults() if "export" in f["component"]]
    left: dict[str, object] = json.loads(record.read_text())
    return left


def _run_record(path: Path) -> object:
    (run,) = [r.run for r in run_records(path) if r.WhichOneof("record_type") == "run"]  # type: ignore[attr-defined]
    return run


def test_wandb_logs_to_its_own_run_grouped_with_the_trainings(tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    env = env_for_tests(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_RUN_ID="train7",
                        WANDB_PROJECT="training")  # fmt: skip
    left = _train(tmp_path, "wandb", env)
    folders = sorted(tmp_path.glob("wandb/offline-run-*"))
    training = [f for f in folders if f.name.endswith("-train7")]
    assert [f.name for f in training] == [left["folder"]]  # never resumed by stepscope
    (data,) = training[0].glob("run-*.wandb")
    assert hashlib.sha256(data.read_bytes()).hexdigest() == left["sha256"]  # as it left it
    assert not [k for _, items in logged(data) for k in items if k.startswith("stepscope")]
    (own,) = [f for f in folders if f not in training]
    (own_data,) = own.glob("run-*.wandb")
    run = _run_record(own_data)
    assert run.run_id != "train7" and run.run_group == "train7"  # type: ignore[attr-defined]
    assert run.display_name == "stepscope job" and run.job_type == "stepscope"  # type: ignore[attr-defined]
    recs = logged(own_data)
    steps = [items["stepscope/step"] for kind, items in recs if kind == "history"]
    assert steps and steps[-1] == STEPS - 1
    summary = {k: v for kind, items in recs if kind == "summary" for k, v in items.items()}
    assert "stepscope/diagnosis" in summary
    assert any(k.startswith("stepscope/rule/") for k in summary)
    kinds = [r.WhichOneof("record_type") for r in run_records(own_data)]  # type: ignore[attr-defined]
    assert "exit" in kinds  # stepscope finished its own run


def test_mlflow_adds_its_keys_to_the_trainings_run_and_changes_nothing_else(
    tmp_path: Path,
) -> None:
    _, client, run_id, mlflow_env = training_mlflow_run(tmp_path)
    left = _train(tmp_path, "mlflow", env_for_tests(**mlflow_env))
    now = json.loads(json.dumps(client.get_run(run_id).to_dictionary()))
    assert now["info"] == left["info"]  # FINISHED by the training, its end time kept
    ours = {k for part in ("metrics", "tags", "params") for k in now["data"].get(part, {})
            if k.startswith("stepscope.")}  # fmt: skip
    for part in ("metrics", "tags", "params"):  # the training's own keys: as it left them
        theirs = {k: v for k, v in now["data"].get(part, {}).items() if k not in ours}
        assert theirs == left["data"].get(part, {}), part  # type: ignore[union-attr]
    assert now["data"]["tags"]["owner"] == "training"
    history = client.get_metric_history(run_id, "stepscope.step_time_s")
    assert history and history[-1].step == STEPS - 1
    assert [m.value for m in client.get_metric_history(run_id, "loss")]  # still there
    assert "stepscope.diagnosis" in now["data"]["tags"]
    assert any(k.startswith("stepscope.rule.") for k in now["data"]["tags"])
    exp = now["info"]["experiment_id"]
    assert len(client.search_runs([exp])) == 1  # no run of stepscope's own beside it
