"""The trackers' live logger (``stepscope.export.live``) holds a bounded number of
system samples while no step comes, and a point still gets the GPU figure of the
samples it kept; logged to a real MLflow file store in a temp folder, read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rules_data as rd
import stepscope

mlflow_tracking = pytest.importorskip("mlflow.tracking")

KEPT = 50  # the logger's bound here (SYSTEM_ROWS in a job)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A file tracking store; no training run: the logger makes a run of its own."""
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    return uri


def _samples(i: int, util: float) -> rd.pd.DataFrame:
    """20 samples, 0.5 s apart, from 10 s times ``i`` into the job."""
    return rd.system_frame(20, start=rd.T0 + 10.0 * i, gpu_util=[np.full(20, util)])


def test_samples_without_steps_stay_bounded_and_the_point_uses_the_newest(
    tmp_path: Path, store: str
) -> None:
    from stepscope.export.live import LiveLogger

    folder = rd.new_job(tmp_path / "j", status="Running")
    job = stepscope.open(str(tmp_path / "j"))
    logger = LiveLogger(job, ["mlflow"], every_s=3600.0, system_rows=KEPT)
    held = []
    for i in range(10):  # 200 samples and no step: 140 at 10% GPU, then 60 at 90%
        logger.seen({"system": _samples(i, 10.0 if i < 7 else 90.0)})
        logger.inbox.join()  # the logging thread took it
        held.append(sum(len(f) for f in logger.system))
    assert held == [20, 40, *[KEPT] * 8]  # bounded from the third frame on
    kept = rd.pd.concat(logger.system)
    assert kept["time"].min() == rd.T0 + 100.0 - 0.5 * KEPT  # the newest ones
    steps = rd.steps_frame(20, start=rd.T0, duration=5.0)  # one 100 s stretch of steps
    rd.write_steps(folder, steps)
    logger.seen({"steps": steps})
    logger.ended([])
    logger.close()
    assert not logger.thread.is_alive()
    client = mlflow_tracking.MlflowClient(tracking_uri=store)
    exp = client.get_experiment_by_name("stepscope")
    assert exp is not None
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.run_name == "j" and run.info.status == "FINISHED"
    # every sample held would give (140 * 10 + 60 * 90) / 200 = 34
    assert run.data.metrics["stepscope.gpu_utilization_pct"] == pytest.approx(90.0)
    assert run.data.metrics["stepscope.step_time_s"] == pytest.approx(5.0)
    assert not list((tmp_path / "j").glob("faults/*"))
