"""The job and comparison objects a notebook displays (rendering is the report's)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stepscope.read import Job
from stepscope.read import list_jobs as read_list_jobs
from stepscope.store import open_store

if TYPE_CHECKING:
    from stepscope.analysis.compare import Comparison, Side


def in_notebook() -> bool:
    """Whether this interpreter is a Jupyter kernel (an IPython shell with a kernel)."""
    if "ipykernel" not in sys.modules:  # never import IPython to find out
        return False
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    shell = get() if callable(get) else None
    return getattr(shell, "kernel", None) is not None


@dataclass(frozen=True)
class Shown:
    """What ``job.show()`` returns in a notebook: the cell's HTML, and the text of
    ``stepscope show`` where a front end shows only text."""

    html: str
    text: str

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text


class NotebookJob(Job):
    """A job that displays itself in a notebook (see the module's docstring)."""

    def _repr_html_(self) -> str:
        from stepscope.report import render_job_cell

        return render_job_cell(self)

    def show_text(self) -> str:
        """What ``stepscope show JOB`` prints: the diagnosis and a one-screen summary."""
        from stepscope.analysis.show_text import render_show
        from stepscope.analysis.summary import summarize

        return render_show(summarize(self))

    def show(self) -> Shown | None:
        """Print what ``stepscope show`` prints; in a notebook, return the HTML display
        instead (the cell shows it)."""
        text = self.show_text()
        if in_notebook():
            return Shown(self._repr_html_(), text)
        print(text)
        return None

    def report(self, path: str | os.PathLike[str] | None = None) -> str:
        """Write the HTML report (to ``report.html`` in the job folder without ``path``);
        returns where it went."""
        from stepscope.report import write_report

        return write_report(self, None if path is None else os.fspath(path))

    def compare(self, new: Side) -> ComparisonView:
        """``new`` (B: a job, or a list of runs) against this job (A, the baseline), as
        ``stepscope compare`` says."""
        return compare(self, new)


class ComparisonView:
    """A comparison (:class:`stepscope.analysis.compare.Comparison`) that a notebook
    displays: per phase the verdict, the step split of A and B, each run's steps."""

    def __init__(self, comparison: Comparison, base: Side, new: Side) -> None:
        from stepscope.analysis.compare import runs_of

        self.comparison, self.base, self.new = comparison, base, new  # as given
        self.base_runs, self.new_runs = runs_of(base), runs_of(new)  # each side's runs

    def _repr_html_(self) -> str:
        from stepscope.report import render_comparison_cell

        return render_comparison_cell(self.comparison, self.base_runs, self.new_runs)

    def __repr__(self) -> str:
        verdicts = "; ".join(p.verdict for p in self.comparison.phases) or "nothing to compare"
        return f"<Comparison {self.comparison.new} against {self.comparison.base}: {verdicts}>"


def compare(base: Side, new: Side) -> ComparisonView:
    """B (``new``) against the baseline A (``base``), displayable in a notebook; each
    side one job or a list of runs of one setup (``stepscope compare A1,A2 B1,B2``)."""
    from stepscope.analysis.compare import compare_sides, runs_of

    return ComparisonView(compare_sides(runs_of(base), runs_of(new)), base, new)


def open(path: str | os.PathLike[str]) -> NotebookJob:
    """Open the job folder at ``path`` (a local path or a URL such as ``s3://b/runs/job``)."""
    return NotebookJob(open_store(path))


def list_jobs(out: str | os.PathLike[str]) -> list[NotebookJob]:
    """Every job directly under the output folder ``out``, oldest first."""
    return [NotebookJob(job.store) for job in read_list_jobs(out)]
