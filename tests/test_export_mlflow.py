"""``stepscope export mlflow``: a job's points, verdicts, diagnosis and report in a real
MLflow tracking store (the file backend in a temp folder), read back with MlflowClient."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rules_data as rd
import stepscope
from mlflow_store import training_mlflow_run
from stepscope.cli import main
from stepscope.export._points import MAX_POINTS, step_points
from stepscope.rules import build_rules
from stepscope.rules.runner import Runner
from stepscope.store import Store
from stepscope.testing import SyntheticJob, write_synthetic_job

mlflow_tracking = pytest.importorskip("mlflow.tracking")

FINDING = {"message": "waiting for data", "severity": 0.8, "start": 1_763_850_100.0,
           "end": 1_763_850_110.0, "node": "node-a", "rank": 0, "steps": [5, 8]}  # fmt: skip
RULES = [
    {"rule": "DataLoading", "status": "IssuesFound", "triggers": 1, "datapoints": 40,
     "message": "waiting for data", "findings": [FINDING], "cost_seconds": 12.5},
    {"rule": "StepOutlier", "status": "NoIssuesFound", "datapoints": 40},
]  # fmt: skip


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlflow_quiet: None) -> str:
    """An empty file tracking store (conftest's ``mlflow_quiet``: allowed, no telemetry),
    no MLflow run or store named by the environment."""
    for name in ("MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    return (tmp_path / "mlruns").as_uri()


def _client(uri: str) -> mlflow_tracking.MlflowClient:
    return mlflow_tracking.MlflowClient(tracking_uri=uri)


def test_a_long_job_lands_downsampled_with_its_verdicts_and_report(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = SyntheticJob(name="long", gpus=1, step_s=0.1)  # 1800 steps: two per point
    write_synthetic_job(str(tmp_path / "long"), spec, RULES)  # type: ignore[arg-type]
    client, run_id = training_mlflow_run(tmp_path)[1:3]  # in the store's folder
    code = main(["export", "mlflow", str(tmp_path / "long"), "--tracking-uri", store,
                 "--run-id", run_id])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert run_id in capsys.readouterr().out
    history = client.get_metric_history(run_id, "stepscope.step_time_s")
    steps = [m.step for m in history]
    assert 500 < len(history) <= MAX_POINTS and steps == sorted(steps)
    assert all(0.05 < m.value < 1.0 for m in history)
    gpu = client.get_metric_history(run_id, "stepscope.gpu_utilization_pct")
    assert gpu and all(0 <= m.value <= 100 for m in gpu)
    share = client.get_metric_history(run_id, "stepscope.data_wait_share")
    assert share and all(0 <= m.value <= 1 for m in share)
    run = client.get_run(run_id)
    assert run.data.tags["stepscope.rule.DataLoading"] == "IssuesFound"
    assert run.data.tags["stepscope.rule.StepOutlier"] == "NoIssuesFound"
    assert "DataLoading" in run.data.tags["stepscope.diagnosis"]
    assert run.data.metrics["stepscope.rule.DataLoading.cost_s"] == 12.5
    listed = [f.path for f in client.list_artifacts(run_id, "stepscope")]
    assert listed == ["stepscope/report.html"]
    assert run.info.status == "RUNNING"  # the user's run: theirs to end


def test_without_a_run_id_a_new_run_in_the_experiment(tmp_path: Path, store: str) -> None:
    write_synthetic_job(str(tmp_path / "j"), SyntheticJob(name="j"))  # no GPU, no verdicts
    assert main(["export", "mlflow", str(tmp_path / "j"), "--tracking-uri", store,
                 "--experiment", "exp-a", "--no-report"]) == 0  # fmt: skip
    client = _client(store)
    exp = client.get_experiment_by_name("exp-a")
    assert exp is not None
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "j"  # the job's name, not the experiment's
    assert "stepscope.gpu_utilization_pct" not in run.data.metrics  # none recorded: absent
    assert run.data.metrics["stepscope.step_time_s"] > 0
    assert not client.list_artifacts(run.info.run_id)
    assert run.data.tags["stepscope.diagnosis"] == "no problem found"


def test_a_bad_run_id_is_one_line(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_synthetic_job(str(tmp_path / "j"), SyntheticJob(name="j"))
    code = main(["export", "mlflow", str(tmp_path / "j"), "--tracking-uri", store,
                 "--run-id", "nope"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("stepscope: error: MLflow refused the export")
    assert err.count("\n") == 1 and "Traceback" not in err and "run id" in err


def test_points_are_medians_of_buckets_and_leave_missing_gpu_out() -> None:
    n = 10
    steps = pd.DataFrame({
        "phase": ["train"] * n + ["eval"],
        "step": [*range(n), 0],
        "start": [float(i) for i in range(n)] + [20.0],
        "end": [i + 0.5 for i in range(n)] + [21.0],
        "duration": [0.5] * (n - 1) + [5.0] + [1.0],  # one slow step: the median holds
        "data_wait": [0.25] * n + [0.0],
    })  # fmt: skip
    system = pd.DataFrame({"time": [0.2, 1.2, 7.2], "gpu0_util": [50.0, np.nan, 90.0]})
    points = step_points(steps, system, max_points=2)
    assert [p.step for p in points] == [4, 9]
    first, second = (p.values for p in points)
    assert first["step_time_s"] == 0.5 and second["step_time_s"] == 0.5
    assert first["data_wait_share"] == pytest.approx(1.25 / 2.5)
    assert first["throughput_steps_per_s"] == pytest.approx(5 / 4.5)
    assert first["gpu_utilization_pct"] == 50.0 and second["gpu_utilization_pct"] == 90.0
    alone = step_points(steps, None)
    assert len(alone) == n and all("gpu_utilization_pct" not in p.values for p in alone)


@pytest.mark.parametrize(
    ("argv", "module", "extra"),
    [
        (["export", "mlflow", "JOB"], "mlflow", "mlflow"),
        (["export", "wandb", "JOB"], "wandb", "wandb"),
        (["run", "-o", "OUT", "--mlflow", "--", "python", "x.py"], "mlflow", "mlflow"),
        (["run", "-o", "OUT", "--wandb", "--", "python", "x.py"], "wandb", "wandb"),
    ],
)
def test_a_missing_extra_prints_its_pip_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    module: str,
    extra: str,
) -> None:
    write_synthetic_job(str(tmp_path / "j"), SyntheticJob(name="j"))
    for name in [m for m in list(sys.modules) if m.split(".")[0] == module]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    paths = {"JOB": str(tmp_path / "j"), "OUT": str(tmp_path / "out")}
    assert main([paths.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"pip install 'stepscope[{extra}]'" in err, err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def _live_job(tmp_path: Path) -> tuple[object, object]:
    import rules_data as rd
    from stepscope.rules.runner import Runner

    store = rd.new_job(tmp_path / "j", status="Running")
    rd.node_info(store, gpus=0)
    rd.write_process_start(store)
    return store, Runner(stepscope.open(str(tmp_path / "j")), build_rules([]))


def _scan(runner: Runner, store: Store, first: int, n: int) -> None:
    frame = rd.steps_frame(n, start=rd.T0 + 5 + first * 0.2)
    frame["step"] += first
    rd.write_steps(store, frame)
    runner.scan()


def test_the_live_logger_logs_each_scan_into_the_training_run_and_never_ends_it(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stepscope.export.live import LiveLogger

    _, client, run_id, env = training_mlflow_run(tmp_path)
    client.log_metric(run_id, "loss", 0.5, step=3)  # what the training logged itself
    client.set_tag(run_id, "owner", "training")
    for key, value in env.items():  # as `stepscope run` hands them to the runner
        monkeypatch.setenv(key, value)
    folder, runner = _live_job(tmp_path)
    logger = LiveLogger(runner.job, ["mlflow"], every_s=0.0)
    runner.observe(logger)
    _scan(runner, folder, 0, 30)
    _scan(runner, folder, 30, 20)
    runner.final()
    runner.close()
    assert not logger.thread.is_alive()
    run = client.get_run(run_id)
    assert run.info.status == "RUNNING"  # the training's to end, never stepscope's
    assert run.data.tags["owner"] == "training" and run.data.metrics["loss"] == 0.5
    history = client.get_metric_history(run_id, "stepscope.step_time_s")
    assert [m.step for m in history] == [29, 49]
    assert all(m.value == pytest.approx(0.2) for m in history)
    assert run.data.tags["stepscope.rule.StepOutlier"] in ("NoIssuesFound", "IssuesFound")
    assert len(client.search_runs([run.info.experiment_id])) == 1  # no run of its own
    assert not list((tmp_path / "j").glob("faults/export-*"))


def test_a_bad_run_id_live_is_a_fault_and_the_runner_goes_on(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stepscope.export.live import LiveLogger

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_RUN_ID", "nope")
    folder, runner = _live_job(tmp_path)
    logger = LiveLogger(runner.job, ["mlflow"], every_s=0.0)
    runner.observe(logger)
    _scan(runner, folder, 0, 30)
    results = runner.final()
    runner.close()
    assert results and not logger.thread.is_alive()
    (fault,) = (tmp_path / "j").glob("faults/export-mlflow-*.json")
    assert "opening the run" in fault.read_text() and "nope" in fault.read_text()
