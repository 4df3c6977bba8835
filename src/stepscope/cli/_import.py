"""``stepscope import sagemaker SRC JOB``: a SageMaker Debugger/Profiler job as a stepscope job.

SRC is the training job's output (a local copy, or ``s3://bucket/prefix/`` of any
S3-compatible store); JOB the job folder to write. Then evaluates the job's rules
as the live runner's final evaluation does and writes ``rules/<Rule>.json``, so
``show`` and the report open with the diagnosis. Prints what was imported, what
had no place, and the verdicts (docs/sagemaker.md). The importer only converts:
judging is the rules' layer, called from here.
"""

from __future__ import annotations

import argparse


def cmd_import(args: argparse.Namespace) -> int:
    origin = convert(args.source, args.job, args.name)
    from stepscope.importers.sagemaker import ImportSummary
    from stepscope.process import give_back_freed_memory

    give_back_freed_memory()  # a long job's evaluation copies and drops large frames
    summary = ImportSummary(args.source, args.job, origin)
    summary.verdicts = diagnose(args.job)
    print(summary.text())
    return 0


def convert(source: str, job: str, name: str | None) -> dict[str, object]:
    """The conversion, in a child process (``stepscope.importers.sagemaker``'s
    ``__main__`` says why); job.json's ``origin``. Its progress and warnings go to
    this process's stderr; a failure it explains is raised here as the same message."""
    import json
    import subprocess
    import sys

    from stepscope.errors import StepscopeError, UsageError

    cmd = [sys.executable, "-m", "stepscope.importers.sagemaker", source, job]
    done = subprocess.run([*cmd, *(["--name", name] if name else [])], stdout=subprocess.PIPE)
    try:
        answer = json.loads(done.stdout or b"{}")
    except ValueError:
        answer = {}
    if done.returncode == 0 and isinstance(answer.get("origin"), dict):
        return dict(answer["origin"])
    if done.returncode == 2 and isinstance(answer.get("error"), str):
        raise UsageError(answer["error"])
    raise StepscopeError(
        f"the import of {source} failed in its child process (exit code {done.returncode}): "
        "its error is above; nothing was judged"
    )


def diagnose(dest: str) -> dict[str, str]:
    """Evaluate an imported job's rules and write ``rules/<Rule>.json``, dated at the
    job's end (the same input, the same files); rule -> status."""
    from stepscope.read import open as open_job
    from stepscope.rules import evaluate_job
    from stepscope.rules.runner import write_results

    job = open_job(dest)
    end, start = job.meta.get("end_time"), job.meta.get("start_time")
    now = end if isinstance(end, float | int) else start if isinstance(start, float | int) else 0.0
    results = evaluate_job(job, now=float(now))
    write_results(job.store, results)
    return {r.rule: r.status.value for r in results}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``import`` (one kind for now: ``sagemaker``) on the ``stepscope`` parser."""
    p = sub.add_parser("import", help="import a job recorded by another tool")
    kinds = p.add_subparsers(dest="kind", required=True, title="kinds", metavar="KIND")
    sm = kinds.add_parser("sagemaker", help="a SageMaker Debugger/Profiler job's output")
    sm.add_argument(
        "source", metavar="SRC", help="the training job's output folder, or s3://bucket/prefix/"
    )
    sm.add_argument(
        "job",
        metavar="JOB",
        help="the stepscope job folder to write, e.g. runs/old-job (must not exist)",
    )
    sm.add_argument("--name", help="the job's name (default: the source folder's name)")
    sm.set_defaults(fn=cmd_import)
