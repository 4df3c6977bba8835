"""scripts/gpu-check's dry run: the whole script on the CPU (the GPU run is docs/gpu.md's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.process


def test_the_dry_run_runs_every_job_and_writes_its_summary(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    env.pop("STEPSCOPE_AGENT", None)
    r = subprocess.run(
        [str(ROOT / "scripts/gpu-check"), "--dry-run", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    steps = {s["step"]: s for s in json.loads((tmp_path / "summary.json").read_text())}
    assert set(steps) == {
        "environment", "gpu tests", "job stall", "job loader", "job leak", "job healthy",
        "job kernels", "job tf32", "job launch", "job pageable", "job pinned",
        "job memory window", "gpu overhead benchmark",
    }  # fmt: skip
    assert steps["environment"]["result"]["differs_from_src"] == []
    # the loader's starvation is planted on the CPU too: its verdicts are required
    assert steps["job loader"]["checks"] == {
        "DataLoading fired": True,
        "DataLoaderWorkers fired": True,
    }
    # a detailed window's kernel breakdown: on the CPU, said to be not applicable
    assert steps["job kernels"]["checks"] == {
        "one detailed window with a kernels entry": True,
        "matmul the largest kind": "False (not required on a dry run)",
        "the GPU busy over 80% of the window": "False (not required on a dry run)",
        "FP32MatMul fired": "False (not required on a dry run)",
        "GPUIdleInSteps silent (kernels judged)": "False (not required on a dry run)",
    }
    # issue 33's planted cases and twins need a GPU: on the CPU their scripts run bare
    for name in ("tf32", "launch", "pageable", "pinned"):
        assert steps[f"job {name}"]["ok"] and "ran bare" in steps[f"job {name}"]["result"]
        assert "LOOP " in (tmp_path / f"{name}.log").read_text()
    # a memory window asked in the dashboard: on the CPU, refused for want of CUDA
    assert steps["job memory window"]["checks"] == {
        "0 steps refused with the valid range": True,
        "the job's answer (a GPU: accepted; the CPU: no CUDA device)": True,
        "a snapshot PyTorch's memory viewer reads": "False (not required on a dry run)",
        "the job stopped from the dashboard": True,
    }
    assert "cannot run: no CUDA device" in steps["job memory window"]["result"]
    for name in ("stall", "leak", "healthy"):  # GPU verdicts: reported, not required
        assert all("not required" in str(v) for v in steps[f"job {name}"]["checks"].values())
        assert (tmp_path / "runs" / name / "job.json").exists()
    assert "skipped" in steps["gpu overhead benchmark"]["result"]
    assert (tmp_path / "summary.md").read_text().count("ok  ") == len(steps)
