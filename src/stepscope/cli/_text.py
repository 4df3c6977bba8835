"""Plain-text rendering for the terminal: ``ls`` here, ``show`` in
:mod:`stepscope.analysis.show_text` (a notebook's ``job.show()`` prints it too)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from stepscope.analysis.show_text import (
    _kernels_line,
    fmt_seconds,
    fmt_value,
    human_bytes,
    job_state,
    render_diagnosis,
    render_show,
)

if TYPE_CHECKING:
    from stepscope.cli._ls import LsRow

__all__ = [
    "_kernels_line",
    "fmt_seconds",
    "fmt_value",
    "human_bytes",
    "job_state",
    "render_diagnosis",
    "render_ls",
    "render_show",
]


def render_ls(rows: list[LsRow]) -> str:
    head = f"{'JOB':<32} {'STATUS':<10} {'STARTED':<20} {'DURATION':>10} {'STEPS':>8}"
    out = [head]
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["start_time"] or 0))
        if r["problem"] is not None:  # no start, duration nor steps to trust: say why
            out.append(f"{r['name']:<32} {r['status']:<10} {r['problem']}")
            continue
        status = r["status"] + (" (incomplete)" if r.get("incomplete") else "")
        out.append(
            f"{r['name']:<32} {status:<10} {started:<20} "
            f"{fmt_seconds(r['duration_seconds']):>10} {r['steps']:>8}"
        )
    return "\n".join(out)
