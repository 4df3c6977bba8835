"""``python -m stepscope.rules.check --base-dir DIR < rules.json``: is a rule set usable?

``stepscope run`` calls it before it starts a job with ``[[rules]]`` of its own, so
that an unknown rule, an unknown or bad parameter, or a custom rule whose file
cannot be loaded is a usage error (exit 2, the message on stderr) and no job
starts. It runs in a process of its own: building rules imports pandas and
DuckDB, which the launcher, alive for the whole job, does without (~60 MB).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from stepscope.errors import RuleConfigError
from stepscope.rules._registry import build_rules


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m stepscope.rules.check")
    p.add_argument("--base-dir", default=".", help="where relative custom-rule paths start")
    args = p.parse_args(argv)
    entries = json.load(sys.stdin)
    try:
        build_rules(entries, base_dir=args.base_dir)
    except RuleConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
