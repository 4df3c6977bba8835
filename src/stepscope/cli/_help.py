"""The ``stepscope`` command's own words: its top-level help, the overview bare
``stepscope`` prints, and "did you mean" for a mistyped choice.

Every subcommand, argument and flag has a one-line help text that says its
default (``tests/test_cli_help.py`` walks the parser and fails on one without).
"""

from __future__ import annotations

import argparse

from stepscope.config import DEFAULT_OUTPUT, suggest

DESCRIPTION = """\
Training debugger and profiler for PyTorch and TensorFlow/Keras.

Run a training command under it, unchanged; then read what it found (the rules'
diagnosis, the step times, the system's use), live or after the job."""
EPILOG = f"""\
examples:
  stepscope demo                        a 20-second job with three planted problems
  stepscope run -- python train.py      run a script as a job (into {DEFAULT_OUTPUT})
  stepscope ls                          the jobs, with the names the other commands take
  stepscope show NAME                   the diagnosis, then a one-screen summary
  stepscope report NAME                 the HTML report
  stepscope compare BASE NEW            is NEW faster or slower than BASE, and why
  stepscope ui                          the live dashboard in a browser

'stepscope COMMAND --help' describes a command's arguments and their defaults."""


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose invalid-choice error suggests the choice meant
    (``stepscope shwo``: did you mean 'show'?); its subcommands' parsers are of this class."""

    def _check_value(self, action: argparse.Action, value: object) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        names = [str(c) for c in choices]
        close = suggest(str(value), names)
        hint = f" Did you mean {close!r}?" if close else ""
        listed = ", ".join(map(repr, names))
        raise argparse.ArgumentError(
            action, f"invalid choice: {value!r}.{hint} (choose from {listed})"
        )


def top_parser(version: str) -> argparse.ArgumentParser:
    """The ``stepscope`` parser, without its subcommands."""
    p = Parser(
        prog="stepscope",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--version",
        action="version",
        version=f"stepscope {version}",
        help="print stepscope's version and exit",
    )
    return p
