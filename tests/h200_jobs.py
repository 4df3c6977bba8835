"""The job folders recorded on an NVIDIA H200 (issue 29), for tests: copies, never the
originals. They sit beside the repository (``../shared/fixtures/h200/``, README there);
a test that needs them is skipped, saying so, where they are absent."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

H200 = Path(__file__).resolve().parents[2] / "shared/fixtures/h200/jobs"


def h200_job(root: Path, name: str) -> Path:
    """A copy under ``root`` of the H200 job ``name`` (stall, loader, leak, healthy)."""
    if not (H200 / name / "job.json").is_file():
        pytest.skip(f"the H200 job folders are not here ({H200}): they sit beside the repository")
    return Path(shutil.copytree(H200 / name, root / name))
