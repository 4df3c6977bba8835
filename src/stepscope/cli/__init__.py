"""The ``stepscope`` command: one small function per subcommand.

Each subcommand lives in a module of its own (:mod:`._run`, :mod:`._profile`,
:mod:`._ui`, :mod:`._rules`, :mod:`._report`, :mod:`._demo`; the readers in
:mod:`._main`). Every command that takes a job reads it through one resolver,
:func:`._jobs.job_arg` (a name as ``ls`` prints it, or a path or URL); the top-level
help and "did you mean" are :mod:`._help`'s (docs/cli.md).

One convention: a subcommand returns its exit code and writes its result to stdout;
bad input raises :class:`stepscope.errors.UsageError` (or any other
:class:`stepscope.errors.StepscopeError`), which :func:`main` prints to stderr as
one line with exit code 2. Nothing else imports this package.
"""

import sys

try:  # the command's imports take a while: a Ctrl-C in them is the same one line as later
    from stepscope.cli._main import main, parser
except KeyboardInterrupt:
    print("stepscope: interrupted", file=sys.stderr)
    raise SystemExit(130) from None  # the shell's code for a process ended by SIGINT

__all__ = ["main", "parser"]
