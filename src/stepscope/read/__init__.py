"""The reader API: ``stepscope.open(path)`` returns a :class:`Job` with DataFrames.

Reads what docs/format.md describes, through :mod:`stepscope.jobfolder`, from any
store (a local folder, ``memory://``, ``s3://``), while the job runs or after it
ended: steps, events and system samples as DataFrames (DuckDB over the Parquet
segments), tensors (:class:`Tensors`), faults and profiling artifacts. It never
imports the code that writes a job.
"""

from typing import TYPE_CHECKING

from stepscope.errors import JobNotFoundError
from stepscope.read._job import Job, list_jobs, open

if TYPE_CHECKING:
    from stepscope.read._tensors import RawTensor, Tensor, Tensors, TensorValue, np_reduce

_TENSORS = ("RawTensor", "Tensor", "TensorValue", "Tensors", "np_reduce")

__all__ = [
    "Job",
    "JobNotFoundError",
    "RawTensor",
    "Tensor",
    "TensorValue",
    "Tensors",
    "list_jobs",
    "np_reduce",
    "open",
]


def __getattr__(name: str) -> object:
    # The tensors' reader (numpy, pandas, pyarrow) only when asked for.
    if name not in _TENSORS:
        raise AttributeError(f"module 'stepscope.read' has no attribute {name!r}")
    from stepscope.read import _tensors

    return getattr(_tensors, name)
