"""Job summary, lifecycle timeline and faults."""

from __future__ import annotations

import shlex

from stepscope.analysis.diagnosis_incomplete import incomplete_reason
from stepscope.analysis.pagescale import percent_text
from stepscope.analysis.report_data import lifecycle
from stepscope.jobfolder import JobJson, json_number
from stepscope.report._context import Context
from stepscope.report._device import device_fact
from stepscope.report._html import badge, esc, fmt_duration, fmt_time, note, section, table


def _command(meta: JobJson) -> str:
    cmd = meta.get("command")
    if isinstance(cmd, list):
        return shlex.join(str(c) for c in cmd)
    return "" if cmd is None else str(cmd)


def _ranks(ctx: Context) -> str:
    if not len(ctx.steps):
        return ", ".join(str(r) for r in ctx.job.ranks()) or "\u2013"
    ranks = sorted(int(r) for r in ctx.steps["rank"].unique())
    return (
        f"{len(ranks)} ({ranks[0]}\u2013{ranks[-1]})"
        if len(ranks) > 3
        else ", ".join(map(str, ranks))
    )


def _status(meta: JobJson) -> str:
    parts = [badge(str(meta.get("status")))]
    if meta.get("exit_code") is not None:
        parts.append(f"exit code {esc(meta['exit_code'])}")
    if meta.get("reason"):
        parts.append(esc(meta["reason"]))
    return " ".join(parts)


def _incomplete(meta: JobJson) -> list[tuple[str, str]]:
    """The row that says the data is incomplete, why and which ranks (none if whole)."""
    reason = incomplete_reason(meta)
    if reason is None:
        return []
    lost = "What their writers held since their last flush was lost; this report shows the rest."
    return [("Data", f"{badge('Incomplete')} {esc(reason)}{note(lost)}")]


def summary_section(ctx: Context) -> str:
    """Command, hosts, ranks, status, duration and the lifecycle timeline."""
    meta = ctx.meta
    start = meta.get("start_time")
    duration = ctx.end_time - float(start) if start is not None else None
    steps = ctx.steps
    counts = steps.groupby("phase").size().to_dict() if len(steps) else {}
    rows: list[tuple[str, str]] = [
        ("Job", esc(meta.get("name"))),
        ("Status", _status(meta)),
        *_incomplete(meta),
        ("Command", f"<code>{esc(_command(meta))}</code>"),
        ("Working directory", esc(meta.get("cwd"))),
        ("Hosts", esc(", ".join(str(h) for h in meta.get("hosts") or ctx.job.nodes()))),
        ("Ranks", esc(_ranks(ctx))),
        ("Started", esc(fmt_time(start))),
        ("Ended", esc(fmt_time(meta.get("end_time")) if meta.get("end_time") else "still running")),
        ("Duration", esc(fmt_duration(duration))),
        ("Steps", esc(", ".join(f"{n} {p}" for p, n in sorted(counts.items())) or "none")),
        ("Recorded by", esc(f"stepscope {meta.get('stepscope_version', '?')}")),
    ]
    device = device_fact(ctx)
    if device is not None:  # a GPU job: where the device's time went, after the step counts
        rows.insert(len(rows) - 1, ("GPU time per step (train)", device))
    body = table(["", ""], rows, cls="facts", raw_cols=(0, 1)) + _timeline(ctx)
    return section("summary", "Job summary", body)


def _timeline(ctx: Context) -> str:
    life = lifecycle(ctx.meta, ctx.steps, ctx.events)
    parts = [
        ("Initialization", life["init_s"], "init"),
        ("Training loop", life["loop_s"], "loop"),
        ("Finalization", life["final_s"], "final"),
    ]
    known = [(n, max(s, 0.0), c) for n, s, c in parts if s is not None]
    if not known:
        return note("No steps were recorded, so there is no timeline of the training loop.")
    total = sum(s for _, s, _ in known) or 1.0
    segs = "".join(
        f'<span class="tl-{c}" style="width:{max(100 * s / total, 0.5):.2f}%" '
        f'title="{esc(n)}: {esc(fmt_duration(s))}"></span>'
        for n, s, c in known
    )
    legend = "".join(
        f'<span><i class="tl-{c}"></i>{esc(n)}: {esc(fmt_duration(s))} '
        f"({percent_text(s / total)})</span>"
        for n, s, c in known
    )
    explain = note(
        "Initialization: from the start of the training process to the start of its first step. "
        "Finalization: from the end of the last step to the end of the job."
    )
    bar = f'<div class="timeline">{segs}</div><div class="legend">{legend}</div>'
    return f"<h3>Timeline</h3>{bar}{explain}"


def faults_section(ctx: Context) -> str:
    """Faults caught by the agent and the sampler; empty when there were none."""
    faults = ctx.job.faults()
    if not faults:
        return ""
    rows = [
        (
            f.get("component"),
            f.get("node"),
            f.get("rank"),
            f.get("pid"),
            f.get("error"),
            f.get("count"),
            fmt_time(json_number(f.get("first_time") or f.get("time"))),
        )
        for f in sorted(faults, key=lambda f: json_number(f.get("time")) or 0.0)
    ]
    head = ["Component", "Node", "Rank", "PID", "Error", "Count", "First seen"]
    intro = note(
        "stepscope caught these faults in its own collection; training went on, "
        "but the data they concern may be incomplete."
    )
    return section("faults", f"Faults ({len(faults)})", intro + table(head, rows, cls="faults"))


def warnings_section(ctx: Context) -> str:
    """The damaged files the report skipped (docs/format.md); empty when there were none."""
    found = ctx.job.warnings
    if not found:
        return ""
    intro = note(
        "These files of the job folder are damaged and were skipped: the report shows "
        "the job without them."
    )
    rows = [(w,) for w in found]
    return section(
        "warnings", f"Damaged files ({len(found)})", intro + table(["Warning"], rows, cls="faults")
    )
