"""An MLflow file store and a run in it, as a training makes one before ``stepscope run``
logs into it (``MLFLOW_RUN_ID``): the set-up of the tests of the MLflow tracker. Their
modules use conftest's ``mlflow_quiet`` fixture, which sets ``QUIET`` for the tests' own
clients too."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

# A file store (MLflow 3 asks to allow one), no telemetry: for the training and the tests.
QUIET = {"MLFLOW_ALLOW_FILE_STORE": "true", "MLFLOW_DISABLE_TELEMETRY": "true"}


class TrainingRun(NamedTuple):
    uri: str  # the file store's tracking URI
    client: MlflowClient  # reads the store back
    run_id: str  # the training's run
    env: dict[str, str]  # MLFLOW_TRACKING_URI, MLFLOW_RUN_ID and QUIET, for the training


def training_mlflow_run(tmp_path: Path) -> TrainingRun:
    """A file store under ``tmp_path/mlruns`` holding one run the training made."""
    from mlflow.tracking import MlflowClient

    uri = (tmp_path / "mlruns").as_uri()
    client = MlflowClient(tracking_uri=uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    env = {"MLFLOW_TRACKING_URI": uri, "MLFLOW_RUN_ID": run_id, **QUIET}
    return TrainingRun(uri, client, run_id, env)
