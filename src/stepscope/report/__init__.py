"""The profiling report: one self-contained HTML file per job (rendering only).

``render_report(job)`` returns the page; ``write_report(job, out_path=None)``
writes it to ``<job>/report.html`` (or ``out_path``) and returns the path.
What is shown comes from ``stepscope.analysis``; the charts from
``stepscope.webcharts``. See docs/report.md. ``render_job_cell`` and
``render_comparison_cell`` are the small fragments a notebook shows
(docs/integrations.md); ``comparison_charts`` the chart specs of a comparison
(each run's steps by step number) that the dashboard draws.
"""

from stepscope.report._cell import render_comparison_cell, render_job_cell
from stepscope.report._compare import comparison_charts
from stepscope.report._render import REPORT_NAME, render_report, write_report

__all__ = [
    "REPORT_NAME",
    "comparison_charts",
    "render_comparison_cell",
    "render_job_cell",
    "render_report",
    "write_report",
]
