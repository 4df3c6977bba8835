"""Jobs and comparisons in a notebook: ``stepscope.open(path)`` returns a :class:`NotebookJob`.

A :class:`NotebookJob` is the reader's :class:`~stepscope.read.Job` that also
displays itself: Jupyter shows its ``_repr_html_`` (the diagnosis, the step
chart and the step split, offline: the chart layer is inlined), ``show()`` prints
what ``stepscope show`` prints (or returns the HTML display in a notebook) and
``report(path)`` writes the HTML report. ``job.compare(other)`` (or
``stepscope.compare(a, b)``) is a :class:`ComparisonView`. Rendering is the
report's (:mod:`stepscope.report`), imported on first display.
"""

from stepscope.notebook._job import ComparisonView, NotebookJob, Shown, compare, list_jobs, open

__all__ = ["ComparisonView", "NotebookJob", "Shown", "compare", "list_jobs", "open"]
