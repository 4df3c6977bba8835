"""``stepscope import sagemaker SRC JOB``: a SageMaker Debugger/Profiler job as a stepscope job.

SRC is the training job's output (a local copy, or ``s3://bucket/prefix/`` of any
S3-compatible store); JOB the job folder to write. Prints what was imported and
what had no place (docs/sagemaker.md).
"""

from __future__ import annotations

import argparse


def cmd_import(args: argparse.Namespace) -> int:
    from stepscope.importers.sagemaker import import_job

    print(import_job(args.source, args.job, name=args.name).text())
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``import`` (one kind for now: ``sagemaker``) on the ``stepscope`` parser."""
    p = sub.add_parser("import", help="import a job recorded by another tool")
    kinds = p.add_subparsers(dest="kind", required=True)
    sm = kinds.add_parser("sagemaker", help="a SageMaker Debugger/Profiler job's output")
    sm.add_argument("source", help="the job's output folder, or s3://bucket/prefix/")
    sm.add_argument("job", help="the stepscope job folder to write (e.g. runs/old-job)")
    sm.add_argument("--name", help="the job's name (default: the source folder's name)")
    sm.set_defaults(fn=cmd_import)
