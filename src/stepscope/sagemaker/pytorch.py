"""``stepscope.sagemaker.pytorch``: the ``PyTorch`` estimator, run on this machine."""

from __future__ import annotations

from stepscope.sagemaker._estimator import Framework


class PyTorch(Framework):
    """``PyTorch(entry_point=..., ...).fit()``: the entry point runs under stepscope here."""

    framework = "pytorch"


__all__ = ["PyTorch"]
