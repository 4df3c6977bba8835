"""Prometheus metrics of a job: ``/metrics`` for ``stepscope run`` and ``stepscope ui``.

:class:`JobMetrics` keeps running totals from a job's rows and rule verdicts,
:func:`render` writes them in the Prometheus text format, :class:`MetricsServer`
serves them (docs/integrations.md, "Prometheus and Grafana"). Nothing here runs
in the training process; this package imports no pandas (it takes frames it is given).
"""

from stepscope.metrics._server import DEFAULT_HOST, MetricsServer
from stepscope.metrics._state import BUCKETS, PARTS, STATUS_VALUES, JobMetrics
from stepscope.metrics._text import CONTENT_TYPE, render

__all__ = [
    "BUCKETS",
    "CONTENT_TYPE",
    "DEFAULT_HOST",
    "PARTS",
    "STATUS_VALUES",
    "JobMetrics",
    "MetricsServer",
    "render",
]
