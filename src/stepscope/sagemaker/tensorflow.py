"""``stepscope.sagemaker.tensorflow``: the ``TensorFlow`` estimator, run on this machine.

The entry point runs under stepscope exactly as with ``PyTorch``; what stepscope
records inside a TensorFlow program (steps, tensors) is issue 23's.
"""

from __future__ import annotations

from stepscope.sagemaker._estimator import Framework


class TensorFlow(Framework):
    """``TensorFlow(entry_point=..., ...).fit()``: the entry point runs under stepscope here."""

    framework = "tensorflow"


__all__ = ["TensorFlow"]
