"""``python -m stepscope.importers.sagemaker SRC JOB [--name NAME]``: the conversion
alone, as ``stepscope import`` runs it, in a child process.

The conversion makes and frees millions of Python objects and Arrow buffers; what the
allocators keep of them (80 MB after a day of a node) would sit under the rules'
evaluation that follows. In a child it goes back to the system when the child exits:
the import of a day-long node then peaks below 500 MB (BENCHMARKS.md). Prints one
JSON object on stdout: ``{"origin": ...}`` (job.json's ``origin``), or ``{"error":
message, "kind": class name}`` with exit code 2 for a failure stepscope explains.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from stepscope.errors import StepscopeError


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m stepscope.importers.sagemaker")
    p.add_argument("source")
    p.add_argument("job")
    p.add_argument("--name")
    args = p.parse_args(argv)
    from stepscope.importers.sagemaker import import_job

    try:
        summary = import_job(args.source, args.job, name=args.name)
    except StepscopeError as exc:
        json.dump({"error": str(exc), "kind": type(exc).__name__}, sys.stdout)
        return 2
    json.dump({"origin": summary.origin}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
