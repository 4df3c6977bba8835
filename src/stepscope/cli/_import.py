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
    from stepscope._alloc import give_back_freed_memory
    from stepscope.importers.sagemaker import import_job

    give_back_freed_memory()  # a day of a node: the rules then peak ~130 MB lower
    summary = import_job(args.source, args.job, name=args.name)
    release_memory()
    summary.verdicts = diagnose(args.job)
    print(summary.text())
    return 0


def release_memory() -> None:
    """Give the import's freed memory back before the rules read the job: Arrow's pool
    and glibc's heap keep freed blocks (150 MB after a day of a node), which would
    add to the evaluation's peak."""
    import contextlib
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


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
