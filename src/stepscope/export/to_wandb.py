"""A job's summary in a Weights & Biases run (``stepscope export wandb``, ``run --wandb``).

The same content as the MLflow export (:mod:`.to_mlflow`), in W&B's names: metrics
``stepscope/<name>`` against their own step metric ``stepscope/step`` (so that they
never disturb the training's own ``wandb.log`` steps in a shared run), each rule's
status in the run's summary as ``stepscope/rule/<Rule>`` and its cost as
``stepscope/rule/<Rule>/cost_s``, the diagnosis as ``stepscope/diagnosis``, and the
HTML report saved with the run's files. Through ``wandb`` (the ``[wandb]`` extra),
imported only here; ``WANDB_MODE=offline`` writes the run locally.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from stepscope.errors import UsageError
from stepscope.export._points import Point, metric_name
from stepscope.export.to_mlflow import quiet_env

if TYPE_CHECKING:
    from wandb.sdk.wandb_run import Run

PIP = "pip install 'stepscope[wandb]'"
STEP = "stepscope/step"
# No console capture, no code or git snapshot, no system stats of the logging process:
# stepscope logs what the job recorded, nothing of the process that logs it.
QUIET_ENV = {
    "WANDB_SILENT": "true",
    "WANDB_CONSOLE": "off",
    "WANDB_DISABLE_CODE": "true",
    "WANDB_INIT_TIMEOUT": "30",  # a server that does not answer: 90 s by default
    "WANDB_ERROR_REPORTING": "false",  # wandb's own crash reports (Sentry) stay home
}


class WandbTracker:
    """One W&B run that stepscope logs into: resumed by its id, or a new one."""

    sep = "/"

    def __init__(self, run_id: str | None, project: str | None, name: str | None) -> None:
        quiet_env(os.environ, QUIET_ENV)
        try:
            import wandb
        except ModuleNotFoundError:
            raise UsageError(f"wandb is not installed: {PIP}") from None
        settings = wandb.Settings(
            x_disable_stats=True,
            x_disable_meta=True,
            x_disable_machine_info=True,
            disable_git=True,
            save_code=False,
            console="off",
        )
        self.run: Run = wandb.init(
            project=project or os.environ.get("WANDB_PROJECT") or "stepscope",
            id=run_id,
            name=name if run_id is None else None,
            resume="allow" if run_id else None,
            settings=settings,
            reinit="create_new",
        )
        self.run.define_metric(STEP, hidden=True)
        self.run.define_metric(metric_name("*", "/"), step_metric=STEP)

    @property
    def where(self) -> str:
        """The run, as the CLI tells the user."""
        return f"W&B run {self.run.id} ({self.run.dir})"

    def log_points(self, points: list[Point]) -> int:
        """Each point's values against ``stepscope/step``; returns how many were logged."""
        logged = 0
        for p in points:
            row = {metric_name(k, "/"): v for k, v in p.values.items()}
            self.run.log({STEP: p.step, **row})
            logged += len(row)
        return logged

    def log_end(self, tags: dict[str, str], costs: dict[str, float], diagnosis: str) -> None:
        """The verdicts and the diagnosis in the run's summary."""
        self.run.summary.update({**tags, **costs, metric_name("diagnosis", "/"): diagnosis})

    def log_report(self, path: str) -> None:
        """The HTML report saved with the run's files (``stepscope/report.html``)."""
        folder = os.path.join(self.run.dir, "stepscope")
        os.makedirs(folder, exist_ok=True)
        target = os.path.join(folder, os.path.basename(path))
        with open(path, "rb") as src, open(target, "wb") as dst:
            dst.write(src.read())
        self.run.save(target, base_path=self.run.dir, policy="now")

    def close(self, finished: bool) -> None:
        """Finish the run (written out, synced unless offline)."""
        self.run.finish(exit_code=0 if finished else 1)


def open_wandb(run_id: str | None, project: str | None, name: str | None) -> WandbTracker:
    """The tracker of the run ``run_id`` (else ``$WANDB_RUN_ID``, else a new run)."""
    return WandbTracker(run_id or os.environ.get("WANDB_RUN_ID"), project, name)
