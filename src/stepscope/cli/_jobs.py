"""Which job a subcommand means: a job folder's path or URL, or a name as ``ls`` prints it.

Every subcommand that takes a job (``show``, ``rules``, ``report``, ``profile``,
``config``, ``export``) registers it with :func:`add_job_argument` and reads it with
:func:`job_arg` (``compare``, which takes several: :func:`add_jobs_argument`,
:func:`jobs_arg`): one resolver, so that a name works the same everywhere. A name is
looked up in one output folder, the one ``stepscope ls`` lists: ``-o FOLDER``, else
``$STEPSCOPE_OUTPUT``, else ``./stepscope-runs`` (:func:`output_folder`).

Looked up in this order: a URL (``s3://...``) or a folder holding a job.json is a path
and taken as it is; then a job folder of that name in the output folder; then a job
whose job.json names it; then the one job whose name starts so. Several matches, or
none, are a one-line error naming the folders searched.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from stepscope.config import DEFAULT_OUTPUT, ENV_VARS
from stepscope.errors import JobNotFoundError, StepscopeError, UsageError

if TYPE_CHECKING:
    from stepscope.store import Store

#: The environment variable that names the output folder (as for ``stepscope run``).
OUTPUT_ENV = next(var for var, arg in ENV_VARS.items() if arg == "output")
FOLDER_HELP = (
    f"output folder a job NAME is looked up in (default ${OUTPUT_ENV}, else {DEFAULT_OUTPUT})"
)
JOB_HELP = "the job: its name as `stepscope ls` prints it, or its folder's path or URL"
NAMES_SHOWN = 5


def add_job_argument(p: argparse.ArgumentParser, *flags: str) -> None:
    """The ``job`` positional and the option (``flags``, default ``-o/--output``) that
    names the folder to look a job name up in."""
    flags = flags or ("-o", "--output")
    p.add_argument("job", metavar="JOB", help=JOB_HELP)
    p.add_argument(*flags, dest="jobs_in", metavar="FOLDER", help=FOLDER_HELP)
    p.set_defaults(jobs_in_flag=flags[0])


def add_jobs_argument(p: argparse.ArgumentParser, help: str) -> None:
    """Several ``jobs`` (at least two) and ``-o/--output``, for a subcommand that takes
    more than one job (``compare``); each is resolved as :func:`job_arg` resolves one."""
    p.add_argument("jobs", nargs="+", metavar="JOB", help=help)
    p.add_argument("-o", "--output", dest="jobs_in", metavar="FOLDER", help=FOLDER_HELP)
    p.set_defaults(jobs_in_flag="-o")


def jobs_arg(args: argparse.Namespace) -> list[str]:
    """The paths or URLs of the jobs ``args`` names (see :func:`add_jobs_argument`)."""
    return [resolve_job(j, args.jobs_in, flag=args.jobs_in_flag) for j in args.jobs]


def job_arg(args: argparse.Namespace) -> str:
    """The path or URL of the job ``args`` names (see :func:`add_job_argument`)."""
    return resolve_job(args.job, args.jobs_in, flag=args.jobs_in_flag)


def against_arg(args: argparse.Namespace) -> list[str]:
    """The paths or URLs of the baseline's runs ``--against`` names (one job, or several
    separated by commas), looked up as the job is; an error says it is about
    ``--against``."""
    try:
        return side_arg(args.against, "the baseline", args)
    except StepscopeError as e:
        raise UsageError(f"--against: {e}") from None


def side_arg(given: str, side: str, args: argparse.Namespace) -> list[str]:
    """The paths or URLs of one side of a comparison: ``given`` names one job, or
    several runs separated by commas (a folder or a URL whose name holds a comma is
    one job);
    ``side`` names it in errors."""
    whole = os.path.isdir(given) or _url_of_a_job(given)
    names = [given] if whole else [x.strip() for x in given.split(",")]
    if not all(names):
        raise UsageError(
            f"{side} {given!r} names no job between its commas: give one job or several "
            "runs separated by commas, e.g. base-1,base-2 (names as `stepscope ls` prints them)"
        )
    paths = [resolve_job(x, args.jobs_in, flag=args.jobs_in_flag) for x in names]
    twice = sorted({x for x, p in zip(names, paths, strict=True) if paths.count(p) > 1})
    if twice:
        raise UsageError(
            f"{side} {given!r} names the same job twice ({', '.join(twice)}): a side's "
            "runs must be different runs, or the spread between them reads as 0"
        )
    return paths


def _url_of_a_job(given: str) -> bool:
    """Whether ``given`` is a URL holding a comma that is itself a job (an object key
    may hold one): it is then one job, not runs separated by commas. A store that
    cannot say is left to the lookup of each part, whose error names it."""
    if "://" not in given or "," not in given:
        return False
    from stepscope.jobfolder import is_job
    from stepscope.store import open_store

    try:
        return is_job(open_store(given))
    except (StepscopeError, OSError):
        return False


def output_folder(given: str | None, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The output folder of the jobs and where it came from: ``given`` (``-o``), the
    environment, or the default; the second is "" for a folder given, else a reason."""
    env = os.environ if env is None else env
    if given:
        return given, ""
    if env.get(OUTPUT_ENV):
        return env[OUTPUT_ENV], f"from ${OUTPUT_ENV}"
    return DEFAULT_OUTPUT, "the default folder"


def shown(folder: str) -> str:
    """``folder`` as the user can find it: an absolute path, or the URL."""
    return folder if "://" in folder else os.path.abspath(os.path.expanduser(folder))


def resolve_job(
    given: str, folder: str | None, env: Mapping[str, str] | None = None, flag: str = "-o"
) -> str:
    """The path or URL of the job ``given`` names: a path or URL as it is, else a name
    looked up in the output folder (``folder``, else the environment's, else the default;
    ``flag`` gives ``folder`` on the command line). Raises ``UsageError`` for a name several
    jobs match, ``JobNotFoundError`` for none; each says where it looked."""
    from stepscope.jobfolder import is_job, missing_job_json
    from stepscope.store import open_store

    if "://" in given or is_job(open_store(given)):
        return given
    if os.path.isdir(given) and missing_job_json(open_store(given)) is not None:
        return given  # job records without job.json: the reader says what is damaged
    if os.sep in given or "/" in given or given in (".", ".."):  # a path, not a name
        why = "it has no job.json" if os.path.isdir(given) else "no such folder"
        raise JobNotFoundError(
            f"No stepscope job at {given!r}: {why}. Give a job folder (OUT/NAME) or a job's name; "
            "`stepscope ls OUT` lists them."
        )
    out, why = output_folder(folder, env)
    where = f"{shown(out)}{f' ({why})' if why else ''}"
    store = open_store(out)
    if store.isdir() and is_job(store, given):  # a folder name: the common case, one lookup
        return store.sub(given).url
    named = _job_names(store) if store.isdir() else {}
    for matches in (
        [f for f, n in named.items() if n == given],
        [f for f, n in named.items() if f.startswith(given) or n.startswith(given)],
    ):
        if len(matches) == 1:
            return store.sub(matches[0]).url
        if matches:
            listed = ", ".join(sorted(matches)[:NAMES_SHOWN])
            more = f" and {len(matches) - NAMES_SHOWN} more" if len(matches) > NAMES_SHOWN else ""
            raise UsageError(
                f"{given!r} names {len(matches)} jobs in {where}: {listed}{more}. "
                "Give the whole name (as `stepscope ls` prints it) or the job folder's path."
            )
    here = "is not a job folder" if os.path.isdir(given) else "does not exist"
    raise JobNotFoundError(
        f"No stepscope job {given!r} in {where}, and the folder {given!r} here {here}. "
        f"`stepscope ls {out}` lists the jobs there; {flag} FOLDER looks in another folder."
    )


def _job_names(store: Store) -> dict[str, str]:
    """Job folder -> the name its job.json gives (the folder's name when unreadable)."""
    from stepscope.jobfolder import is_job, paths

    names: dict[str, str] = {}
    for folder in store.listdir():
        if not is_job(store, folder):
            continue
        try:
            meta = store.sub(folder).read_json(paths.JOB_JSON)
        except (OSError, ValueError):  # a damaged job.json: still found by its folder's name
            meta = None
        name = meta.get("name") if isinstance(meta, dict) else None
        names[folder] = name if isinstance(name, str) else folder
    return names
