"""``stepscope export mlflow JOB`` and ``stepscope export wandb JOB``: a job's summary
in an experiment tracker's run (docs/integrations.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from stepscope.cli._jobs import add_job_argument, job_arg
from stepscope.errors import UsageError

if TYPE_CHECKING:
    from stepscope.export.trackers import Tracker


def _tracker_error(backend: str, exc: Exception) -> UsageError:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return UsageError(
        f"{backend} refused the export ({type(exc).__name__}: {first}). Check the run id, "
        "the tracking URI or project, and that the server answers."
    )


def _export(
    args: argparse.Namespace,
    open_tracker: Callable[[argparse.Namespace, str], Tracker],
    backend: str,
) -> int:
    from stepscope.export.trackers import export_job
    from stepscope.read import open

    job = open(job_arg(args))  # a missing job is said before the tracker is touched
    try:
        tracker = open_tracker(args, job.name)  # a new run is named after the job
        done = export_job(tracker, job, report=not args.no_report)
    except UsageError:
        raise
    except Exception as exc:  # the tracker's own errors: one line, what to check
        raise _tracker_error(backend, exc) from None
    print(
        f"logged {done.metrics} metrics at {done.points} steps and {done.rules} rule "
        f"verdicts to {done.where}"
    )
    return 0


def cmd_mlflow(args: argparse.Namespace) -> int:
    from stepscope.export.to_mlflow import open_mlflow

    return _export(
        args, lambda a, job: open_mlflow(a.run_id, a.tracking_uri, a.experiment, job), "MLflow"
    )


def cmd_wandb(args: argparse.Namespace) -> int:
    from stepscope.export.to_wandb import open_wandb

    return _export(args, lambda a, job: open_wandb(a.run_id, a.project, a.name or job), "W&B")


def _common(p: argparse.ArgumentParser, run_env: str) -> None:
    add_job_argument(p)
    p.add_argument(
        "--run-id",
        metavar="ID",
        help=f"the run to log into (default ${run_env}, else a new run)",
    )
    p.add_argument(
        "--no-report",
        action="store_true",
        help="leave the HTML report out (default: it is attached to the run)",
    )


def add_parsers(kinds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``mlflow`` and ``wandb`` kinds of ``stepscope export``."""
    p = kinds.add_parser("mlflow", help="the job's metrics, verdicts and report in an MLflow run")
    _common(p, "MLFLOW_RUN_ID")
    p.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="the tracking server or store, e.g. sqlite:///mlflow.db "
        "(default $MLFLOW_TRACKING_URI, else MLflow's default)",
    )
    p.add_argument(
        "--experiment",
        metavar="NAME",
        help="the experiment of a new run (default: stepscope; ignored with a run id)",
    )
    p.set_defaults(fn=cmd_mlflow)
    p = kinds.add_parser("wandb", help="the job's metrics, verdicts and report in a W&B run")
    _common(p, "WANDB_RUN_ID")
    p.add_argument(
        "--project",
        metavar="P",
        help="the W&B project (default $WANDB_PROJECT, else stepscope)",
    )
    p.add_argument(
        "--name", metavar="NAME", help="the display name of a new run (default: the job's name)"
    )
    p.set_defaults(fn=cmd_wandb)
