"""Reductions and host copies, on the tensor's own device, without a host sync.

Every function here only enqueues work: reductions stay on the device until the
step's batch is stacked and copied once (:func:`stack_to_host`). On CPU the
"copy" of a raw tensor is a clone, because the optimizer updates parameters in
place right after they are captured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import torch

# std and variance are population statistics (numpy's default, ddof=0).
_REDUCE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "min": lambda x: x.amin(),
    "max": lambda x: x.amax(),
    "mean": lambda x: x.mean(),
    "std": lambda x: x.std(correction=0),
    "variance": lambda x: x.var(correction=0),
    "sum": lambda x: x.sum(),
    "prod": lambda x: x.prod(),
    "l1": lambda x: x.abs().sum(),
    "l2": lambda x: x.norm(2),
}


def _float(t: torch.Tensor) -> torch.Tensor:
    import torch

    x = t.detach()
    if not x.is_floating_point() or x.element_size() < 4:
        x = x.to(torch.float32)  # ints, bools and half types reduce in float32
    return x


def reduce(t: torch.Tensor, names: tuple[str, ...]) -> list[torch.Tensor]:
    """The 0-dim device tensors of reductions ``names`` (``l2``, ``abs_mean``, ...) of ``t``."""
    import torch

    x = _float(t)
    if x.numel() == 0:
        return [torch.full((), float("nan"), device=x.device) for _ in names]
    out = []
    absx = None
    for name in names:
        base = name.removeprefix("abs_")
        if base != name:
            absx = x.abs() if absx is None else absx
            out.append(_REDUCE[base](absx))
        else:
            out.append(_REDUCE[base](x))
    return out


def scalar(t: torch.Tensor) -> torch.Tensor:
    """A 0-dim detached view of a one-element tensor (a loss, a recorded scalar)."""
    return t.detach().reshape(())


def to_host(t: torch.Tensor) -> torch.Tensor:
    """A host copy of ``t`` that later in-place updates cannot change (async on CUDA)."""
    import torch

    x = t.detach()
    if x.device.type == "cpu":
        return x.clone()
    buf = torch.empty(x.shape, dtype=x.dtype, device="cpu", pin_memory=x.is_cuda)
    buf.copy_(x, non_blocking=True)
    return buf


class HostVector:
    """A float64 host vector being copied from devices; :meth:`read` waits for it."""

    def __init__(self, host: torch.Tensor) -> None:
        self.host = host
        self.parts: list[tuple[list[int], torch.Tensor]] = []  # (indices, host buffer)
        self.event: torch.cuda.Event | None = None

    def wait(self) -> None:
        """Block until the asynchronous copies (and every copy before them) are done."""
        if self.event is not None:
            self.event.synchronize()

    def read(self) -> npt.NDArray[np.float64]:
        """The values as a numpy float64 array (waits for the copies first)."""
        import torch

        self.wait()
        for idx, buf in self.parts:
            self.host[idx] = buf.to(torch.float64)
        return self.host.numpy()


def stack_to_host(values: list[torch.Tensor]) -> HostVector:
    """One host float64 vector of 0-dim tensors, copied per device in one batch.

    Nothing waits here: on CUDA the copy is asynchronous and the returned vector's
    event marks its end (the writer thread waits on it, never the training thread).
    """
    import torch

    by_device: dict[torch.device, list[int]] = {}
    for i, v in enumerate(values):
        by_device.setdefault(v.device, []).append(i)
    out = HostVector(torch.empty(len(values), dtype=torch.float64))
    for device, idx in by_device.items():
        dtype = torch.float32 if device.type == "mps" else torch.float64
        stacked = torch.stack([values[i].to(dtype) for i in idx])
        if device.type == "cpu":
            out.host[idx] = stacked
            continue
        buf = torch.empty(len(idx), dtype=dtype, device="cpu", pin_memory=device.type == "cuda")
        buf.copy_(stacked, non_blocking=True)
        out.parts.append((idx, buf))
    if any(d.type == "cuda" for d in by_device) or _cuda_busy():
        event = out.event = torch.cuda.Event()  # type: ignore[no-untyped-call]  # torch's
        event.record()
    return out


def _cuda_busy() -> bool:
    """Whether CUDA is in use in this process (raw copies may still be in flight)."""
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())  # type: ignore[no-untyped-call]
