"""Import a SageMaker Debugger/Profiler job (its S3 output, or a local copy).

```python
from stepscope.importers.sagemaker import import_job
summary = import_job("s3://bucket/job-prefix/", "runs/old-job")
summary.counts          # what was read and written, by kind
summary.unplaced        # what has no place in stepscope's format, counted
```
The layout read, and what each field becomes, is documented in docs/sagemaker.md.
"""

from stepscope.importers.sagemaker._job import ImportSummary, import_job

__all__ = ["ImportSummary", "import_job"]
