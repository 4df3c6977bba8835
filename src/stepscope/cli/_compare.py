"""``stepscope compare A B [C ...]``: the verdict line, then a compact table (docs/compare.md).

Each argument is a side: one job, or several runs of one setup separated by commas
(``A1,A2,A3 B1,B2,B3``). Rendering only: the numbers are
:func:`stepscope.analysis.compare.compare_sides`'s. The gate (``--fail-if-slower PCT``)
reads the first phase of each comparison (training, where both sides trained) and
fails only when the lower bound of its 95% interval of the slowdown is past the limit
(with several runs a side, the interval that carries the spread between runs): a
slowdown within the noise of the runs passes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING

from stepscope.cli._jobs import add_jobs_argument, side_arg
from stepscope.errors import UsageError

if TYPE_CHECKING:
    from stepscope.analysis.compare import Comparison, LeftOut, PhaseComparison
    from stepscope.analysis.compare_runs import RunSpread
    from stepscope.analysis.compare_stats import Interval

JOBS_HELP = (
    "the jobs: the baseline first, then one or more to compare with it "
    "(names as `stepscope ls` prints them, or folders' paths or URLs); "
    "several runs of one side separated by commas: A1,A2,A3 B1,B2,B3"
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compare", help="is a job faster or slower than a baseline, and why")
    add_jobs_argument(p, JOBS_HELP)
    p.add_argument("--json", action="store_true", help="print JSON instead of text (default: text)")
    p.add_argument(
        "--fail-if-slower",
        metavar="PCT",
        type=percent,
        help="exit 1 when a job is slower than the baseline by more than PCT (e.g. 5%%) "
        "beyond the noise: the 95%% interval's lower bound (default: no gate, exit 0)",
    )
    p.set_defaults(fn=cmd_compare)


def percent(text: str) -> float:
    """``5%`` or ``5`` -> 5.0; anything else is a usage error that says the form."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a percentage: give a number >= 0, e.g. 5% or 5"
        )
    return value


def cmd_compare(args: argparse.Namespace) -> int:
    from stepscope.analysis.compare import compare_sides
    from stepscope.read import open as open_job

    if len(args.jobs) < 2:
        raise UsageError(
            f"compare needs two jobs or more (got {len(args.jobs)}): "
            "stepscope compare BASELINE JOB [JOB ...] (several runs a side: A1,A2 B1,B2)"
        )
    sides = [[open_job(p) for p in side] for side in sides_arg(args)]
    comparisons = [compare_sides(sides[0], side) for side in sides[1:]]
    print(to_json(comparisons) if args.json else "\n\n".join(map(render, comparisons)))
    return gate(comparisons, args.fail_if_slower)


def sides_arg(args: argparse.Namespace) -> list[list[str]]:
    """Each side's jobs' paths or URLs (:func:`~stepscope.cli._jobs.side_arg`)."""
    return [
        side_arg(given, "A (the baseline)" if n == 0 else f"side {n + 1}", args)
        for n, given in enumerate(args.jobs)
    ]


def gate(comparisons: list[Comparison], limit: float | None) -> int:
    """1 when a comparison's slowdown is surely past ``limit`` %, else 0; a failed gate
    says so in one line on stderr (which side, its lower bound, what the bound holds)."""
    if limit is None:
        return 0
    failed = 0
    for c in comparisons:
        low = c.phases[0].slower_low_pct if c.phases else None
        if low is not None and low > limit:
            failed = 1
            one = len(c.base_runs) < 2 and len(c.new_runs) < 2
            held = "; one run a side: the spread between runs is not in it" if one else ""
            print(
                f"stepscope compare: gate failed: {c.new} is slower than {c.base} by at "
                f"least {low:.1f}% (the 95% lower bound{held}), past --fail-if-slower "
                f"{limit:g}%",
                file=sys.stderr,
            )
    return failed


def to_json(comparisons: list[Comparison]) -> str:
    """Every comparison as JSON (:func:`~stepscope.analysis.compare_json.comparison_doc`)."""
    from stepscope.analysis.compare_json import comparison_doc

    return json.dumps([comparison_doc(c) for c in comparisons], indent=1)


def _s(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x * 1000:.1f} ms"


def _one(o: LeftOut) -> str:
    left = f"{o.warmup} warm-up, {o.profiled} profiled, {o.outliers} outliers left out"
    return f"{o.kept} of {o.total} ({left})"


def _left(phase: PhaseComparison) -> str:
    return f"  steady steps  A: {_one(phase.base_left_out)}\n{'':16}B: {_one(phase.new_left_out)}"


def _pct(i: Interval) -> str:
    return f"{100 * (i.value - 1):+.1f}% ({100 * (i.low - 1):+.1f} to {100 * (i.high - 1):+.1f}%)"


def _rate(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}"


def _phase_table(c: Comparison, phase: PhaseComparison) -> list[str]:
    rows = [f"{phase.phase}: {phase.verdict}", _left(phase)]
    rows.append(f"  {'':<14}{'A':>12}{'B':>12}   change (95% interval)")
    ratio = phase.ratio
    change = "" if ratio is None else _pct(ratio)
    rows.append(f"  {'step median':<14}{_s(phase.base_median):>12}{_s(phase.new_median):>12}"
                f"   {change}")  # fmt: skip
    rows.append(f"  {'step p90':<14}{_s(phase.base_p90):>12}{_s(phase.new_p90):>12}")
    a, b = phase.throughput
    rows.append(f"  {'steps/s':<14}{_rate(a):>12}{_rate(b):>12}")
    sa, sb = c.samples_per_s(phase)
    if sa is not None or sb is not None:
        rows.append(f"  {'samples/s':<14}{_rate(sa):>12}{_rate(sb):>12}")
    if phase.contention is not None:
        a_text, b_text = (_share(c.wait_share) for c in phase.contention)
        rows.append(f"  {'core wait':<14}{a_text:>12}{b_text:>12}   judged on {phase.basis}")
    if phase.runs is not None:
        rows.append(f"  {'run medians':<14}{_runs(phase.runs)}")
    for p in phase.parts:
        i = p.change
        rows.append(
            f"  {p.part:<14}{_s(p.base_s):>12}{_s(p.new_s):>12}   "
            f"{1000 * i.value:+.1f} ms ({1000 * i.low:+.1f} to {1000 * i.high:+.1f}); "
            f"share {100 * p.base_share:.0f}% -> {100 * p.new_share:.0f}%"
            + ("; beyond the spread between runs" if p.beyond_noise else "")
        )
    rows += [f"  {m.part:<14}{m.text()}, not compared" for m in phase.missing_parts]
    return rows


def _runs(r: RunSpread) -> str:
    """Each run's median step, and the spread between runs (or why it is unknown)."""
    a, b = (", ".join(f"{1000 * x:.1f}" for x in side) for side in (r.base_medians, r.new_medians))
    spread = (
        f"spread between runs {r.spread_pct:.1f}% ({r.df} df)"
        if r.spread_pct is not None
        else "spread between runs unknown (one run a side)"
    )
    return f"A: {a} ms   B: {b} ms   {spread}"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _or(value: str | None, missing: str) -> str:
    return f"({missing})" if value is None else value


def _n(runs: list[str], sep: str = ", ") -> str:
    """``, 3 runs`` (or `` (3 runs)``) for a side of several runs."""
    if len(runs) < 2:
        return ""
    return f"{sep}{len(runs)} runs" + (")" if sep.endswith("(") else "")


def render(c: Comparison) -> str:
    """The verdict line first (the first phase's), then the table of each phase, the
    setup facts that differ and the rules whose status changed."""
    first = c.phases[0].verdict if c.phases else "no phase recorded by both jobs"
    lines = [
        first,
        f"A: {c.base} (baseline{_n(c.base_runs)})   B: {c.new}{_n(c.new_runs, ' (')}",
        "",
    ]
    for phase in c.phases:
        lines += _phase_table(c, phase)
    lines += [m.text() for m in c.missing_phases]
    lines.append("setup differences:" if c.setup.facts else "setup: no differences recorded")
    lines += [f"  {key}: {_or(a, 'not recorded')} -> {_or(b, 'not recorded')}"
              for key, a, b in c.setup.facts]  # fmt: skip
    if c.setup.rules:
        lines.append("rules whose verdict changed:")
        lines += [f"  {rule}: {_or(a, 'not run')} -> {_or(b, 'not run')}"
                  for rule, a, b in c.setup.rules]  # fmt: skip
    return "\n".join(lines)
