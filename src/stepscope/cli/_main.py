"""The ``stepscope`` command: its parser, every subcommand's module adding its own
(``_readers``: the ones that read a job), and the one boundary that turns a
``StepscopeError`` into one line on stderr and exit 2."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from stepscope.cli._compare import add_parser as add_compare_parser
from stepscope.cli._help import top_parser
from stepscope.cli._import import add_parser as add_import_parser
from stepscope.cli._profile_args import add_parsers as add_profiling_parsers
from stepscope.cli._readers import add_export_parser, add_reader_parsers
from stepscope.cli._run import add_parser as add_run_parser
from stepscope.cli._ui import add_parser as add_ui_parser
from stepscope.errors import StepscopeError


def parser() -> argparse.ArgumentParser:
    """The ``stepscope`` command's parser, every subcommand on it."""
    p = top_parser(_version())
    sub = p.add_subparsers(dest="subcommand", required=True, title="commands", metavar="COMMAND")
    add_run_parser(sub)
    add_reader_parsers(sub)
    add_compare_parser(sub)
    add_export_parser(sub)
    add_profiling_parsers(sub)
    add_ui_parser(sub)
    add_import_parser(sub)
    return p


def _version() -> str:
    from stepscope import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # bare `stepscope`: the overview, as --help prints it; not a mistake
        parser().print_help()
        _flush_quietly()
        return 0
    try:
        return _run(argv)
    except KeyboardInterrupt:  # Ctrl-C where the command has no end of its own for it
        print("stepscope: interrupted", file=sys.stderr)  # (`ui`: 0, `run`: its command's)
        return 130  # the shell's code for a process ended by SIGINT


def _run(argv: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit:  # --help, --version, a usage error: argparse printed it
        _flush_quietly()
        raise
    fn: Callable[[argparse.Namespace], int] = args.fn
    try:
        code = fn(args)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
        return code
    except StepscopeError as exc:  # usage, config, job folder, store: one line, exit 2
        print(f"stepscope: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        return _missing_extra(exc)
    except BrokenPipeError:  # `stepscope show JOB | head`: the reader has what it wanted
        _silence_stdout()
        return 141  # the shell's code for a process ended by SIGPIPE


def one_line(message: str, limit: int = 2000) -> str:
    """``message`` on one line, cut to ``limit`` characters: the last guard of the rule
    that an error is one readable line, whatever a value quoted in it held."""
    flat = " ".join(message.splitlines())
    return flat if len(flat) <= limit else f"{flat[: limit - 1]}…"


def _silence_stdout() -> None:
    """Python would report the closed pipe again when it flushes stdout at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _flush_quietly() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


def _missing_extra(exc: ModuleNotFoundError) -> int:
    extras = {
        "torch": "torch",
        "starlette": "dashboard",
        "uvicorn": "dashboard",
        "s3fs": "s3",
        "tensorboardX": "tensorboard",
        "mlflow": "mlflow",
        "wandb": "wandb",
    }
    extra = extras.get((exc.name or "").split(".")[0])
    if extra is None:
        raise exc
    pin = " torch==2.13.0" if extra == "torch" else ""
    print(
        f"stepscope: error: this needs the [{extra}] extra: pip install 'stepscope[{extra}]'{pin}",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
