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


def test_gpu_parts_are_timed_with_events(run_job, tmp_path):
    script = tmp_path / "gpu_train.py"
    script.write_text(
        "import torch\n"
        "m = torch.nn.Linear(1024, 1024).cuda(); o = torch.optim.SGD(m.parameters(), 0.1)\n"
        "for _ in range(20):\n"
        "    m(torch.randn(256, 1024, device='cuda')).sum().backward(); o.step(); o.zero_grad()\n"
    )
    r = run_job([str(script)], "--no-rules")
    assert r.code == 0, r.stderr
    steps = stepscope.open(r.job_path).steps(phase="train")
    assert len(steps) == 20
    later = steps.iloc[1:]  # CUDA is initialised by the first forward
    assert (later["gpu_forward"] > 0).all() and (later["gpu_backward"] > 0).all()
    assert SCRIPTS.exists()
