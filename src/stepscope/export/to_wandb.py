"""A job's summary in a Weights & Biases run (``stepscope export wandb``, ``run --wandb``).

The same content as the MLflow export (:mod:`.to_mlflow`), in W&B's names: metrics
``stepscope/<name>`` against their own step metric ``stepscope/step`` (so that they
never disturb the training's own ``wandb.log`` steps in a shared run), each rule's
status in the run's summary as ``stepscope/rule/<Rule>`` and its cost as
``stepscope/rule/<Rule>/cost_s``, the diagnosis as ``stepscope/diagnosis``, and the
HTML report saved with the run's files. Through ``wandb`` (the ``[wandb]`` extra),
imported only here; ``WANDB_MODE=offline`` writes the run locally.

Live (:func:`open_wandb_beside`), stepscope never touches the training's own run:
it logs to a run of its own, grouped with the training's (``group``: the training's
``$WANDB_RUN_GROUP``, else its ``$WANDB_RUN_ID``, else the job's name), named after
the job, and finishes only that run.
"""

from __future__ import annotations

import os
import secrets
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


JOB_TYPE = "stepscope"  # the job_type of the runs stepscope makes


class WandbTracker:
    """One W&B run that stepscope logs into: resumed by its id (export only), or a
    new one (in ``group``, when given)."""

    sep = "/"

    def __init__(
        self, run_id: str | None, project: str | None, name: str | None, group: str | None = None
    ) -> None:
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
        self.made = run_id is None  # a run stepscope made is stepscope's to finish
        # a new run gets its id here: wandb would otherwise take $WANDB_RUN_ID (and
        # $WANDB_RESUME) from the environment, the training's own run
        self.run: Run = wandb.init(
            project=project or os.environ.get("WANDB_PROJECT") or "stepscope",
            id=run_id or secrets.token_hex(4),
            name=name if self.made else None,
            group=group if self.made else None,
            job_type=JOB_TYPE if self.made else None,
            resume="allow" if run_id else "never",
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
        """Finish the run (written out, synced unless offline). A run given by its id
        is finished too: W&B writes a resumed run only through ``finish``, and only
        ``stepscope export`` resumes one, at the user's word (``--run-id``)."""
        self.run.finish(exit_code=0 if finished else 1)


def open_wandb(run_id: str | None, project: str | None, name: str | None) -> WandbTracker:
    """The tracker of the run ``run_id`` (else ``$WANDB_RUN_ID``, else a new run)."""
    return WandbTracker(run_id or os.environ.get("WANDB_RUN_ID"), project, name)


def training_group(job_name: str) -> str:
    """The group of stepscope's live run: the training's group, else its run, else the job."""
    env = os.environ
    return env.get("WANDB_RUN_GROUP") or env.get("WANDB_RUN_ID") or job_name


def open_wandb_beside(job_name: str) -> WandbTracker:
    """A new run of stepscope's own, beside the training's (``run --wandb``): in the
    training's project (``$WANDB_PROJECT``) and group (:func:`training_group`), named
    ``stepscope <job>``. The training's run (``$WANDB_RUN_ID``) is never resumed."""
    return WandbTracker(None, None, f"stepscope {job_name}", training_group(job_name))
