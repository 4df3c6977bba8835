"""The device's view of a GPU job's steps (docs/gpu.md): the split the report leads with.

Only where the steps have device times (``gpu_forward``... docs/format.md); a CPU
job's report has none of this.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis.device import (
    DEVICE_INPUTS,
    DeviceSplit,
    busy_text,
    device_parts,
    device_split,
    ran_ahead_text,
    split_text,
)
from stepscope.report._context import Context
from stepscope.report._html import chart, esc, note


def phase_device(rows: pd.DataFrame) -> DeviceSplit | None:
    """The device split of one phase's steps, all ranks (None without device times)."""
    return device_split({c: rows[c].to_numpy(np.float64) for c in DEVICE_INPUTS if c in rows})


def device_line(split: DeviceSplit) -> str:
    """The one line: each part's median device time and share, and the GPU-busy share."""
    return f"{split_text(split)}: {busy_text(split)}"


def device_fact(ctx: Context) -> str | None:
    """The job summary's row of the training steps' device split, with the host-ran-ahead
    line (escaped HTML); None for a job without device times."""
    split = phase_device(ctx.steps[ctx.steps["phase"] == "train"]) if len(ctx.steps) else None
    if split is None:
        return None
    ahead = ran_ahead_text(split)
    line = esc(device_line(split))
    return line + (f'<br><span class="ran-ahead">{esc(ahead)}</span>' if ahead else "")


def device_block(ctx: Context, rows: pd.DataFrame, phase: str) -> str:
    """The phase's device split as a line, a share bar and a table; '' without device times."""
    split = phase_device(rows)
    if split is None:
        return ""
    parts = device_parts(split)
    share = ctx.charts.add_share(
        f"{phase} device split (median step)",
        [p for p, _ in parts],
        [v["seconds"] for _, v in parts],
        [v["share"] for _, v in parts],
    )
    ahead = ran_ahead_text(split)
    return (
        "<h4>Split of a step on the GPU</h4>"
        + f'<p class="device-line">{esc(device_line(split))}</p>'
        + (f'<p class="ran-ahead">{esc(ahead)}</p>' if ahead else "")
        + chart(share, "The device's time in each part (CUDA events), median over the steps.")
        + note(
            f"Over {split['steps']} steps of all ranks. The GPU-busy share is the device time "
            "over the host's step time, both summed over the steps (docs/gpu.md)."
        )
    )
