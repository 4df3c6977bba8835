"""The reader API: ``stepscope.open(path)`` returns a :class:`Job` with DataFrames.

Reads what docs/format.md describes, through :mod:`stepscope.jobfolder`, from any
store (a local folder, ``memory://``, ``s3://``), while the job runs or after it
ended: steps, events and system samples as DataFrames (DuckDB over the Parquet
segments), tensors (:class:`Tensors`), faults and profiling artifacts, and the
kernel breakdown of a window's PyTorch trace (``Job.kernels``, :func:`breakdown`) and
its operators' efficiency against the card's peaks (``Job.efficiency``;
docs/profiling.md). It never imports the code that writes a job.
"""

from typing import TYPE_CHECKING

from stepscope.errors import JobNotFoundError
from stepscope.read._efficiency import NO_SHAPES, Efficiency, NoEfficiency, OpEfficiency, efficiency
from stepscope.read._job import Job, list_jobs, open
from stepscope.read._kernel_kinds import KINDS, kind_of
from stepscope.read._kernels import (
    NO_KERNELS,
    DeviceBusy,
    KernelBreakdown,
    KindTime,
    NoKernels,
    TopKernel,
    breakdown,
)
from stepscope.read._peaks import UNKNOWN_CARD, Peaks, peaks_of
from stepscope.read._trace import DeviceEvent, Trace, load_trace

if TYPE_CHECKING:
    from stepscope.read._tensors import RawTensor, Tensor, Tensors, TensorValue, np_reduce

_TENSORS = ("RawTensor", "Tensor", "TensorValue", "Tensors", "np_reduce")

__all__ = [
    "KINDS",
    "NO_KERNELS",
    "NO_SHAPES",
    "UNKNOWN_CARD",
    "DeviceBusy",
    "DeviceEvent",
    "Efficiency",
    "Job",
    "JobNotFoundError",
    "KernelBreakdown",
    "KindTime",
    "NoEfficiency",
    "NoKernels",
    "OpEfficiency",
    "Peaks",
    "RawTensor",
    "Tensor",
    "TensorValue",
    "Tensors",
    "TopKernel",
    "Trace",
    "breakdown",
    "efficiency",
    "kind_of",
    "list_jobs",
    "load_trace",
    "np_reduce",
    "open",
    "peaks_of",
]


def __getattr__(name: str) -> object:
    # The tensors' reader (numpy, pandas, pyarrow) only when asked for.
    if name not in _TENSORS:
        raise AttributeError(f"module 'stepscope.read' has no attribute {name!r}")
    from stepscope.read import _tensors

    return getattr(_tensors, name)
