"""A job's summary in an MLflow run (``stepscope export mlflow``, ``run --mlflow``).

Metrics ``stepscope.<name>`` on MLflow's step axis (the points of
:mod:`stepscope.export._points`), each rule's status as the tag
``stepscope.rule.<Rule>`` and its cost as the metric ``stepscope.rule.<Rule>.cost_s``,
the diagnosis as the tag ``stepscope.diagnosis``, and the HTML report as the
artifact ``stepscope/report.html``. Through ``MlflowClient`` (the ``[mlflow]`` extra,
``mlflow-skinny``), imported only here.

Live, with ``$MLFLOW_RUN_ID`` set, the figures go into the training's own run, as the
issue asked ("logged to that run"): MLflow takes metrics and tags for one run from
several processes, and every key stepscope writes starts with ``stepscope.``, so none
meets the training's. stepscope never ends a run it did not make (W&B, which can
write into a run from one process only, gets a run of stepscope's own: to_wandb.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from stepscope.errors import UsageError
from stepscope.export._points import Point, metric_name

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

PIP = "pip install 'stepscope[mlflow]'"
# MLflow's HTTP client retries an unreachable server for minutes by default: a tracker
# that does not answer is said at once (export) or recorded as a fault (live).
QUIET_ENV = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_DISABLE_TELEMETRY": "true",
}
BATCH = 1000  # MLflow's log_batch takes at most 1000 metrics a call
TAG_LIMIT = 5000  # characters of a tag's value that every store keeps
JOB_TAG = "stepscope.job"


def quiet_env(env: Mapping[str, str], extra: Mapping[str, str]) -> None:
    """Set ``extra``'s variables in ``os.environ`` where ``env`` does not set them."""
    for key, value in extra.items():
        if key not in env:
            os.environ[key] = value


class MlflowTracker:
    """One MLflow run that stepscope logs into: the given one, or a new one."""

    sep = "."

    def __init__(
        self,
        run_id: str | None,
        tracking_uri: str | None,
        experiment: str | None,
        name: str | None = None,
    ) -> None:
        quiet_env(os.environ, QUIET_ENV)
        try:
            from mlflow.tracking import MlflowClient
        except ModuleNotFoundError:
            raise UsageError(f"MLflow is not installed: {PIP}") from None
        self.client: MlflowClient = MlflowClient(tracking_uri=tracking_uri)
        self.made = run_id is None  # a run stepscope made is stepscope's to end
        self.run_id = run_id or self._new_run(experiment, name)
        self.client.get_run(self.run_id)  # a bad id or an unreachable server: now, once

    def _new_run(self, experiment: str | None, name: str | None) -> str:
        tags = {JOB_TAG: name} if name else {}
        exp_name = experiment or "stepscope"
        found = self.client.get_experiment_by_name(exp_name)
        exp_id = found.experiment_id if found else self.client.create_experiment(exp_name)
        run_name = name or exp_name
        return str(self.client.create_run(exp_id, run_name=run_name, tags=tags).info.run_id)

    @property
    def where(self) -> str:
        """The run, as the CLI tells the user."""
        return f"MLflow run {self.run_id} ({self.client.tracking_uri})"

    def log_points(self, points: list[Point]) -> int:
        """Each point's values as metrics at its step; returns how many were logged."""
        from mlflow.entities import Metric

        metrics = [
            Metric(metric_name(k), v, int(p.time * 1000), p.step)
            for p in points
            for k, v in p.values.items()
        ]
        for i in range(0, len(metrics), BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[i : i + BATCH])
        return len(metrics)

    def log_end(self, tags: dict[str, str], costs: dict[str, float], diagnosis: str) -> None:
        """The verdicts (tags, cost metrics) and the diagnosis."""
        from mlflow.entities import Metric, RunTag

        now = int(time.time() * 1000)
        all_tags = {**tags, metric_name("diagnosis"): diagnosis[:TAG_LIMIT]}
        self.client.log_batch(
            self.run_id,
            metrics=[Metric(k, v, now, 0) for k, v in costs.items()],
            tags=[RunTag(k, v) for k, v in all_tags.items()],
        )

    def log_report(self, path: str) -> None:
        """The HTML report file as an artifact under ``stepscope/``."""
        self.client.log_artifact(self.run_id, path, artifact_path="stepscope")

    def close(self, finished: bool) -> None:
        """Ends a run that stepscope made (a given run is the user's to end)."""
        if self.made:
            self.client.set_terminated(self.run_id, "FINISHED" if finished else "FAILED")


def open_mlflow(
    run_id: str | None,
    tracking_uri: str | None,
    experiment: str | None,
    name: str | None = None,
) -> MlflowTracker:
    """The tracker of the run ``run_id`` (else ``$MLFLOW_RUN_ID``, else a new run
    named ``name`` in ``experiment``, default ``stepscope``)."""
    run = run_id or os.environ.get("MLFLOW_RUN_ID")
    return MlflowTracker(run, tracking_uri, experiment, name)
