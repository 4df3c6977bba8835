"""``stepscope demo``: run the demo job (three planted problems) under stepscope, write its
report, then show the summary and what the rules found, and check each planted problem.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from stepscope.config import StepscopeConfig
from stepscope.launch import RunSpec, run

if TYPE_CHECKING:
    from stepscope.read import Job

# The demo's rule set: ProfilerReport with two thresholds lowered for a short job:
# 4 checkpoints are outliers enough (the default tolerates 10), and a start of more than
# 6 s before the first step is slow (the default is 20 minutes): the planted start
# (demo_train.SLOW_START_S, a wait) is longer alone; the fixed job's (imports) is 2 to
# 3 s of CPU, and the time it waits for a core on a busy machine is left out.
INIT_THRESHOLD_MIN = 0.1
RULES: tuple[dict[str, object], ...] = (
    {
        "name": "ProfilerReport",
        "parameters": {
            "StepOutlier_n_outliers": 2,
            "MaxInitializationTime_threshold": INIT_THRESHOLD_MIN,
        },
    },
)
# What demo_train plants, and the rule that must name it.
PLANTED = (
    ("a slow start: 8 s to prepare the data before the first step", "MaxInitializationTime"),
    ("a data loader that starves the loop: slow reads, num_workers=0", "DataLoading"),
    ("a slow checkpoint every 45 training steps", "StepOutlier"),
)


def run_demo(output: str) -> int:
    """Run the demo job into ``output`` and print what stepscope found; the job's exit code."""
    from stepscope.read import open as open_job

    name = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    spec = RunSpec(
        command=[sys.executable, "-m", "stepscope.cli.demo_train"],
        output=output,
        job=name,
        config=StepscopeConfig(rules=RULES).to_dict(),
    )
    code = run(spec)
    path = f"{output.rstrip('/')}/{name}"
    _report(path)
    print(f"Open the dashboard:  stepscope ui {output}")
    job = open_job(path)
    _show(job)
    _rules(job)
    return code


def _show(job: Job) -> None:
    from stepscope.analysis.summary import summarize
    from stepscope.cli._text import render_show

    print("\n" + render_show(summarize(job)))


def _rules(job: Job) -> None:
    from stepscope.cli._rules import render_table, rules_results

    results = rules_results(job, [], [])
    print("\n" + render_table(results))
    fired = {r.rule for r in results if (r.verdict or r.status).value == "IssuesFound"}
    print("\nThe demo planted three problems; the rules that name them:")
    for what, rule in PLANTED:
        mark = "found" if rule in fired else "MISSED"
        print(f"  {mark:6}  {rule:22} {what}")


def _report(path: str) -> None:
    from stepscope.cli._report import write_with_progress

    print(f"\nReport: {write_with_progress(path, None)}")
