"""The job folders recorded on an NVIDIA H200 (issue 29), for tests: copies, never the
originals. Checked in under ``tests/data/h200/`` (recorded at 2900dce; README there
says what was planted in each) and ``tests/data/h200-sampled/`` (the same jobs recorded
by scripts/gpu-check with the sampled device timer; tests/data/README.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
H200 = DATA / "h200"
H200_SAMPLED = DATA / "h200-sampled"


def h200_job(root: Path, name: str, sampled: bool = False) -> Path:
    """A copy under ``root`` of the H200 job ``name`` (stall, loader, leak, healthy)."""
    src = (H200_SAMPLED if sampled else H200) / name
    return Path(shutil.copytree(src, root / (f"{name}-sampled" if sampled else name)))
