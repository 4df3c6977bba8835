"""Exports of a job's data to other tools: :mod:`.tensorboard` writes its tensors
as TensorBoard event files (``stepscope export tensorboard``); :mod:`.trackers` logs
its step metrics, verdicts, diagnosis and report into an MLflow (:mod:`.to_mlflow`) or
W&B (:mod:`.to_wandb`) run (``stepscope export mlflow|wandb``), and :mod:`.live` does
it while the job trains, from the live rule runner's process (``run --mlflow``)."""
