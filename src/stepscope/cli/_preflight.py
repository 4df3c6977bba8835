"""What ``stepscope run`` checks before it creates a job: the command can be started,
the output folder can be written, the job's own ``[[rules]]`` can be built.

Each failure is a :class:`UsageError` (one line, exit 2) raised before the job
folder exists, so a bad invocation leaves no job behind, let alone one ``Running``.
"""

from __future__ import annotations

import os
import shutil
import sys

from stepscope.errors import UsageError, quote

_ELF = b"\x7fELF"


def check_command(program: str) -> str:
    """The path of ``program`` (a name on PATH or a file), after checking that the
    system can start it: found, executable, and a binary or a ``#!`` script whose
    interpreter exists."""
    path = shutil.which(program)
    if path is None:
        if os.sep in program and os.path.isdir(program):
            raise UsageError(f"{program!r} is a folder, not a command to run.")
        if os.sep in program and os.path.exists(program):
            raise UsageError(
                f"{program!r} is not executable: make it so (chmod +x {program}), "
                f"or run it with its interpreter: stepscope run -- python {program}"
            )
        raise UsageError(f"command not found: {quote(program)}. Check the name and your PATH.")
    if sys.platform.startswith("linux"):  # other systems start other formats
        _check_format(program, path)
    return path


def _check_format(program: str, path: str) -> None:
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError as exc:
        raise UsageError(f"cannot read {program!r}: {exc.strerror}.") from None
    fix = f"run it with its interpreter: stepscope run -- python {program}"
    if head.startswith(b"#!"):
        words = head[2:].split(b"\n", 1)[0].split()
        interpreter = words[0].decode(errors="replace") if words else ""
        if not interpreter or os.path.isdir(interpreter) or not os.access(interpreter, os.X_OK):
            raise UsageError(
                f"{program!r} cannot be started: its #! line names {interpreter!r}, "
                f"which is not an executable file. Fix that line, or {fix}"
            )
    elif not head.startswith(_ELF):
        raise UsageError(
            f"{program!r} cannot be started: it is neither a program nor a script "
            f"with a #! line. Add one (#!/usr/bin/env python3), or {fix}"
        )


def check_output(output: str, job: str) -> None:
    """A local output folder (or its job folder) that is a file, or cannot be
    written, is refused before anything is created; URLs are left to the store."""
    if "://" in output:
        return
    path = os.path.abspath(os.path.join(os.path.expanduser(output), job))
    probe = path
    while not os.path.exists(probe):  # the deepest part that exists
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise UsageError(
            f"cannot write the job into {quote(output)}: {quote(probe)} is a file, not a folder. "
            "Give an output folder with -o (default ./stepscope-runs), or another --job."
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(
            f"cannot write the job into {quote(output)}: {quote(probe)} is not writable. "
            "Give another output folder with -o."
        )


def check_rules(rules: list[dict[str, object]]) -> None:
    """The job's own ``[[rules]]`` built once before anything starts (stepscope.rules.check:
    a process of its own, so the launcher stays free of pandas and DuckDB). A rule set
    that cannot be built would leave the job without live rules: no job is started."""
    import json
    import subprocess

    cmd = [sys.executable, "-m", "stepscope.rules.check", "--base-dir", os.getcwd()]
    done = subprocess.run(cmd, input=json.dumps(rules, default=str), capture_output=True, text=True)
    if done.returncode == 2:
        raise UsageError(f"{done.stderr.strip()} No job was started.")
    if done.returncode != 0:  # e.g. a custom rule's file that fails when loaded
        lines = done.stderr.strip().splitlines()
        last = lines[-1] if lines else f"exit code {done.returncode}"
        raise UsageError(
            f"the [[rules]] of the configuration could not be built: {last}. "
            "Fix them (or run with --no-rules). No job was started."
        )
