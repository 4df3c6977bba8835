"""``stepscope export tensorboard JOB DIR``: a job's tensors as TensorBoard event files.

One run per rank and phase (``DIR/rank-<r>/train``, ``DIR/rank-<r>/eval``): scalars
(losses, recorded scalars) under their name, reductions as ``<name>/<reduction>``,
raw tensors as histograms. Written with tensorboardX (the ``[tensorboard]`` extra),
read by TensorBoard (``tensorboard --logdir DIR``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from stepscope.read import Job, Tensors

PHASES = ("train", "eval")


@dataclass
class ExportSummary:
    """What an export wrote."""

    runs: int = 0
    scalars: int = 0
    histograms: int = 0


def _tag(name: str, key: str) -> str:
    return name if key == "value" else f"{name}/{key}"


def _export_run(tensors: Tensors, phase: str, logdir: str, out: ExportSummary) -> None:
    from tensorboardX import SummaryWriter

    scalars, index = tensors.scalars(phase=phase), tensors.index(phase=phase)
    if not len(scalars) and not len(index):
        return
    writer = SummaryWriter(logdir=logdir)
    try:
        for name, key, step, value, t in zip(
            scalars["name"],
            scalars["key"],
            scalars["step"],
            scalars["value"],
            scalars["time"],
            strict=True,
        ):
            writer.add_scalar(_tag(name, key), float(value), int(step), walltime=float(t))
            out.scalars += 1
        for _, row in index.iterrows():
            values = tensors.load(row).astype("float64").ravel()
            if values.size:
                writer.add_histogram(
                    str(row["name"]), values, int(row["step"]), walltime=float(row["time"])
                )
                out.histograms += 1
    finally:
        writer.close()
    out.runs += 1


def export_tensorboard(job: Job, out_dir: str) -> ExportSummary:
    """Write the tensors of every rank of ``job`` (a :class:`stepscope.Job`) into ``out_dir``."""
    tensors = job.tensors
    summary = ExportSummary()
    for rank in tensors.ranks():
        for phase in PHASES:
            logdir = os.path.join(out_dir, f"rank-{rank}", phase)
            _export_run(tensors.rank(rank), phase, logdir, summary)
    return summary
