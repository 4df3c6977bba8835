"""Real CUDA event timing under `stepscope run` (skipped without an NVIDIA GPU)."""

from __future__ import annotations

import pytest
import torch

import stepscope
from conftest import SCRIPTS

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]


def _steps(run_job, tmp_path, body: str, steps: int):
    script = tmp_path / "gpu_train.py"
    script.write_text(
        "import time, torch\n"
        "m = torch.nn.Linear(1024, 1024).cuda(); o = torch.optim.SGD(m.parameters(), 0.1)\n"
        f"for _ in range({steps}):\n"
        "    m(torch.randn(256, 1024, device='cuda')).sum().backward(); o.step(); o.zero_grad()\n"
        f"    {body}\n"
    )
    r = run_job([str(script)], "--no-rules")
    assert r.code == 0, r.stderr
    return stepscope.open(r.job_path).steps(phase="train")


def test_long_steps_are_all_timed_with_events(run_job, tmp_path):
    steps = _steps(run_job, tmp_path, "time.sleep(0.06)", 20)  # longer than the period
    assert len(steps) == 20
    later = steps.iloc[1:]  # CUDA is initialised by the first forward
    assert (later["gpu_forward"] > 0).all() and (later["gpu_backward"] > 0).all()
    assert (later["gpu_optimizer"] > 0).all()
    assert SCRIPTS.exists()


def test_short_steps_are_sampled(run_job, tmp_path):
    steps = _steps(run_job, tmp_path, "pass", 3000)  # well under a millisecond each
    timed = steps[steps["gpu_forward"].notna()]
    assert 3 <= len(timed) < len(steps) / 5  # one step per 50 ms of training
    assert (timed["gpu_forward"] > 0).all() and (timed["gpu_backward"] > 0).all()
    # an untimed step has no device part at all: unknown, not zero
    untimed = steps[steps["gpu_forward"].isna()]
    assert untimed[["gpu_backward", "gpu_optimizer"]].isna().all().all()
