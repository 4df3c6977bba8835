"""``stepscope demo``: run the demo job under stepscope, summarize, report, point at the UI."""

from __future__ import annotations

import sys
import time

from stepscope.launch import RunSpec, run


def run_demo(output: str) -> int:
    from stepscope.analysis.summary import summarize
    from stepscope.cli._text import render_show
    from stepscope.config import StepscopeConfig
    from stepscope.read import open as open_job

    name = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    spec = RunSpec(
        command=[sys.executable, "-m", "stepscope.cli.demo_train"],
        output=output,
        job=name,
        config=StepscopeConfig().to_dict(),
    )
    code = run(spec)
    job = open_job(f"{output.rstrip('/')}/{name}")
    print("\n" + render_show(summarize(job)))
    _rules(job.path)
    _report(job.path)
    print(f"\nOpen the dashboard:  stepscope ui {output}")
    return code


def _rules(path: str) -> None:
    try:
        from stepscope.cli._rules import rules_text
    except ImportError:
        return
    print("\n" + rules_text(path, [], [], False))


def _report(path: str) -> None:
    try:
        from stepscope.cli._report import write_with_progress
    except ImportError:
        return
    print(f"\nReport: {write_with_progress(path, None)}")
