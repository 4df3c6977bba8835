"""A small training that logs its loss to its own tracker run, as a user's script does.

Usage: python tracked_train.py --tracker wandb|mlflow --record PATH [--steps N]
``wandb``: ``wandb.init()`` (the run ``$WANDB_RUN_ID``, offline under ``$WANDB_DIR``);
``mlflow``: ``mlflow.start_run()`` (the run ``$MLFLOW_RUN_ID``). Once its run is
finished it writes what it left to PATH (JSON): the W&B run's folder and the sha256
of its ``.wandb`` file, or the MLflow run as ``MlflowClient.get_run`` reads it.
"""

import argparse
import hashlib
import json
from pathlib import Path

import torch
from torch import nn


def train(steps: int, log) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 32, generator=torch.Generator().manual_seed(0))
    y = (x.sum(1) > 0).long()
    for step in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        log(step, loss.item())


def with_wandb(steps: int) -> dict:
    import wandb

    run = wandb.init(project="training", settings=wandb.Settings(console="off"))
    train(steps, lambda step, loss: run.log({"loss": loss}, step=step))
    run.finish()
    wandb.teardown()  # its service writes the last records: the file is whole after it
    folder = Path(run.dir).parent
    (data,) = folder.glob("run-*.wandb")
    return {"id": run.id, "folder": folder.name,
            "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}  # fmt: skip


def with_mlflow(steps: int) -> dict:
    import mlflow

    with mlflow.start_run() as run:
        mlflow.set_tag("owner", "training")
        train(steps, lambda step, loss: mlflow.log_metric("loss", loss, step=step))
    return mlflow.tracking.MlflowClient().get_run(run.info.run_id).to_dictionary()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tracker", choices=("wandb", "mlflow"), required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--steps", type=int, default=40)
    a = p.parse_args()
    left = with_wandb(a.steps) if a.tracker == "wandb" else with_mlflow(a.steps)
    Path(a.record).write_text(json.dumps(left))


if __name__ == "__main__":
    main()
