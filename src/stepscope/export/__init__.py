"""Exports of a job's data to other tools: :mod:`.tensorboard` writes its tensors
as TensorBoard event files (``stepscope export tensorboard``)."""
