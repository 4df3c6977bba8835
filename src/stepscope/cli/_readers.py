"""The subcommands that read a job: ``ls``, ``show``, ``rules``, ``report``, ``demo``
and ``export``, their parsers and one small function each (``_main`` puts them on
the ``stepscope`` command beside the others' modules)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from stepscope.cli._export_trackers import add_parsers as add_tracker_parsers
from stepscope.cli._jobs import OUTPUT_ENV, add_job_argument, against_arg, job_arg, output_folder
from stepscope.config import DEFAULT_OUTPUT
from stepscope.errors import UsageError

if TYPE_CHECKING:
    from stepscope.read import Job


def cmd_ls(args: argparse.Namespace) -> int:
    from stepscope.cli._ls import ls_text

    if args.output and args.jobs_in and args.output != args.jobs_in:
        raise UsageError(f"two folders: {args.output!r} and -o {args.jobs_in!r}: give one")
    print(ls_text(*output_folder(args.output or args.jobs_in), args.json))
    return 0


def _open(args: argparse.Namespace) -> Job:
    from stepscope.read import open

    return open(job_arg(args))


def cmd_show(args: argparse.Namespace) -> int:
    from stepscope.analysis.summary import summarize
    from stepscope.cli._text import render_show

    summary = summarize(_open(args))
    print(json.dumps(summary, indent=1, default=str) if args.json else render_show(summary))
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    from stepscope.cli._rules import rules_text
    from stepscope.process import give_back_freed_memory

    give_back_freed_memory()  # a long job's evaluation copies and drops large frames
    print(rules_text(job_arg(args), args.rule or [], args.param or [], args.json, args.save))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from stepscope.cli._report import write_with_progress

    against = None if args.against is None else against_arg(args)
    print(write_with_progress(job_arg(args), args.output, against=against))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from stepscope.cli._demo import run_demo

    return run_demo(output_folder(args.output)[0])


def cmd_export(args: argparse.Namespace) -> int:
    from stepscope.export.tensorboard import export_tensorboard

    job = _open(args)
    done = export_tensorboard(job, args.dir)
    for w in job.warnings:
        print(f"stepscope: warning: {w}", file=sys.stderr)
    print(
        f"wrote {done.scalars} scalars and {done.histograms} histograms in {done.runs} "
        f"run(s) to {args.dir}: tensorboard --logdir {args.dir}"
    )
    return 0


JSON_HELP = "print JSON instead of text (default: text)"


def add_export_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``export``: the job's tensors to TensorBoard, its data to the trackers."""
    p = sub.add_parser(
        "export", help="export a job's data to another tool (tensorboard, mlflow, wandb)"
    )
    kinds = p.add_subparsers(dest="kind", required=True, title="kinds", metavar="KIND")
    tb = kinds.add_parser("tensorboard", help="the job's saved tensors as TensorBoard event files")
    add_job_argument(tb)
    tb.add_argument(
        "dir", metavar="DIR", help="folder for the event files (tensorboard --logdir DIR)"
    )
    tb.set_defaults(fn=cmd_export)
    add_tracker_parsers(kinds)


def add_reader_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``ls``, ``show``, ``rules``, ``report`` and ``demo``."""
    p = sub.add_parser("ls", help="list the jobs of an output folder, with their names")
    p.add_argument(
        "output",
        nargs="?",
        metavar="OUT",
        help=f"the output folder to list (default ${OUTPUT_ENV}, else {DEFAULT_OUTPUT})",
    )
    p.add_argument(
        "-o", "--output", dest="jobs_in", metavar="FOLDER", help="the same as OUT (default: OUT)"
    )
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(fn=cmd_ls)
    p = sub.add_parser("show", help="the diagnosis and a one-screen summary of a job")
    add_job_argument(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(fn=cmd_show)
    p = sub.add_parser("rules", help="judge a job with its rules now: statuses and findings")
    add_job_argument(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.add_argument(
        "--rule",
        action="append",
        metavar="NAME",
        help="only this rule (repeatable; default: the job's rules)",
    )
    p.add_argument(
        "--param",
        action="append",
        metavar="NAME.key=value",
        help="a rule parameter, e.g. StepOutlier.stddev=3 (repeatable; default: the job's)",
    )
    p.add_argument(
        "--save",
        action="store_true",
        help="record the results as the job's verdicts (rules/*.json: show, report); "
        "default: print only",
    )
    p.set_defaults(fn=cmd_rules)
    p = sub.add_parser("report", help="write the HTML profiling report of a job")
    add_job_argument(p, "--in")
    p.add_argument(
        "-o", "--output", metavar="FILE", help="the file to write (default JOB/report.html)"
    )
    p.add_argument(
        "--against",
        metavar="BASELINE",
        help="add a comparison section: this job against the job BASELINE, named as JOB "
        "is, or several runs of it separated by commas, A1,A2,A3 (default: no comparison; "
        "see `stepscope compare`)",
    )
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("demo", help="run a small demo job with three planted problems")
    p.add_argument(
        "-o",
        "--output",
        metavar="FOLDER",
        help=f"output folder to write the job into (default ${OUTPUT_ENV}, else {DEFAULT_OUTPUT})",
    )
    p.set_defaults(fn=cmd_demo)
