"""Profiling windows: what ran when, top operators and functions, the loader, the files.

Records come from ``Job.profiling_artifacts()``; each window's summaries from
its own files (``_profile_data``). Files are linked by paths relative to the
report's folder, so the links keep working when the job folder is downloaded
with its report. Nothing is fetched: traces are opened by the user in Perfetto.
"""

from __future__ import annotations

import os
import posixpath
from urllib.parse import quote

from stepscope.jobfolder import JsonObject
from stepscope.read import Job
from stepscope.report import _profile_data as data
from stepscope.report._context import Context
from stepscope.report._html import esc, fmt_duration, fmt_time, note, section, table
from stepscope.report._profile_efficiency import efficiency_table
from stepscope.report._profile_kernels import kernels_table
from stepscope.report._profile_loader import dataloader_table
from stepscope.report._profile_memory import memory_section

MAX_WINDOWS = 200  # rows of the windows table
MAX_DETAILED = 20  # windows per kind shown in detail (the newest ones)
OPEN_DETAILED = 3  # shown open; the others in a collapsed block
PERFETTO = "https://ui.perfetto.dev"


def safe_key(key: object) -> bool:
    """A window's file key that may become a link: relative, inside ``profiling/``."""
    if not isinstance(key, str) or not key.startswith("profiling/") or "\\" in key:
        return False
    return ".." not in key.split("/") and posixpath.normpath(key) == key


class Links:
    """Hrefs from the report's folder to the job's files (None: no usable link)."""

    def __init__(self, job: Job, out_dir: str | None) -> None:
        self.job, self.out_dir = job, out_dir

    def href(self, key: str) -> str | None:
        if not safe_key(key):
            return None
        if self.out_dir is None:  # the report sits in the job folder
            return quote(key)
        local = self.job.store.local_path(key)
        if local is None:
            return None
        try:
            rel = os.path.relpath(local, self.out_dir)
        except ValueError:  # another drive (Windows)
            return None
        return quote(rel.replace(os.sep, "/"))

    def html(self, record: JsonObject) -> str:
        """One link per artifact of the window, named by what it is."""
        out = []
        for key in data.files_of(record):
            label, href = data.file_label(key), self.href(key)
            if href is None:
                out.append(f'<code title="{esc(key)}">{esc(label)}</code>')
            else:
                out.append(f'<a href="{esc(href)}" title="{esc(key)}">{esc(label)}</a>')
        return " · ".join(out)


def _settings(record: JsonObject) -> JsonObject:
    w = record.get("window")
    return w if isinstance(w, dict) else {}


def window_kind(record: JsonObject) -> str:
    """``python (cprofile, cpu_time)``, ``detailed (record_shapes)``, ``deep``..."""
    kind = str(record.get("kind"))
    w = _settings(record)
    opts: list[str] = []
    if kind == "python":
        opts = [str(w.get("python_profiler") or "cprofile")]
        if opts[0] == "cprofile":
            opts.append(str(w.get("cprofile_timer") or "total_time"))
    elif kind == "detailed":
        opts = [k for k in ("record_shapes", "profile_memory", "with_stack") if w.get(k)]
    label = f"{kind} ({', '.join(opts)})" if opts else kind
    return label + (" · live" if record.get("request") else "")


def window_title(record: JsonObject) -> str:
    return f"{window_kind(record)}, rank {record.get('rank')}, {_steps(record)}"


def _steps(record: JsonObject) -> str:
    a, b = record.get("start_step"), record.get("end_step")
    return f"step {a}" if a == b else f"steps {a}\u2013{b}"


def _truncated(record: JsonObject) -> str:
    cut = record.get("truncated")
    if not cut:
        return "no"
    if isinstance(cut, dict) and "kept_events" in cut:
        return f"yes: kept {cut.get('kept_events')} of {cut.get('total_events')} events"
    return "yes"


def _duration(record: JsonObject) -> float | None:
    start, end = data.num(record.get("start_time")), data.num(record.get("end_time"))
    return end - start if start is not None and end is not None else None


def _windows_table(records: list[JsonObject], links: Links) -> str:
    rows = [
        (
            esc(window_kind(r)),
            esc(r.get("rank")),
            esc(_steps(r).split(" ", 1)[1]),
            esc(fmt_time(data.num(r.get("start_time")))),
            esc(fmt_duration(_duration(r))),
            esc(_truncated(r)),
            links.html(r),
        )
        for r in records[:MAX_WINDOWS]
    ]
    head = ["Kind", "Rank", "Steps", "Started", "Duration", "Truncated", "Files"]
    more = len(records) - MAX_WINDOWS
    extra = note(f"{more} more windows are not listed.") if more > 0 else ""
    return table(head, rows, cls="windows", raw_cols=range(7)) + extra


def _us(v: object) -> str:
    us = data.num(v)
    return fmt_duration(us / 1e6 if us is not None else None)


def _s(v: object) -> str:
    return fmt_duration(data.num(v))


def operators_table(job: Job, record: JsonObject) -> str:
    ops = data.operators(job, record)
    if not ops:
        return note("No operator table was saved for this window.")
    device = any(data.num(o.get("self_device_us")) for o in ops)
    head = ["Operator", "Calls", "Self CPU", "CPU total"] + (["Self device"] if device else [])
    rows = [
        (o.get("name"), o.get("count"), _us(o.get("self_cpu_us")), _us(o.get("cpu_total_us")))
        + ((_us(o.get("self_device_us")),) if device else ())
        for o in ops
    ]
    return table(head, rows, cls="num operators")


def _where(f: JsonObject) -> str:
    builtin = f.get("file") in ("~", "<built-in>")
    return "built-in" if builtin else f"{f.get('file')}:{f.get('line')}"


def functions_table(job: Job, record: JsonObject) -> str:
    w = _settings(record)
    if w.get("python_profiler") == "pyinstrument":
        funcs, timer = data.pyinstrument_functions(job, record), "sampled wall time"
    else:
        funcs, timer = data.cprofile_functions(job, record), str(w.get("cprofile_timer") or "")
    if not funcs:
        return note("No function table was saved for this window.")
    rows = [
        (
            f.get("name"),
            _where(f),
            f.get("calls", "\u2013"),
            _s(f.get("own_s")),
            _s(f.get("cumulative_s")),
        )
        for f in funcs
    ]
    head = ["Function", "Where", "Calls", "Own time", "Cumulative"]
    return note(f"Times are of the {timer} timer.") + table(head, rows, cls="functions")


def _detail_blocks(records: list[JsonObject], made: list[str]) -> str:
    """The newest windows' blocks (``made``, one per window of ``records[-MAX_DETAILED:]``)."""
    newest = records[-MAX_DETAILED:]
    blocks = [f"<h4>{esc(window_title(r))}</h4>{m}" for r, m in zip(newest, made, strict=True)]
    shown, rest = "".join(blocks[:OPEN_DETAILED]), "".join(blocks[OPEN_DETAILED:])
    if rest:
        more = f"{len(blocks) - OPEN_DETAILED} more windows"
        shown += f"<details><summary>{more}</summary>{rest}</details>"
    if len(records) > MAX_DETAILED:
        shown += note(f"The {len(records) - MAX_DETAILED} oldest windows are not shown in detail.")
    return shown


def _made_by_window(job: Job, records: list[JsonObject]) -> dict[str, list[str]]:
    """Each detail's blocks of its newest windows, made window by window: a window's
    kernels and efficiency follow one another and so share one parse of its trace
    (read/_trace_views.py keeps the last one parsed)."""
    newest = {
        anchor: {id(r) for r in [r for r in records if r.get("kind") in kinds][-MAX_DETAILED:]}
        for anchor, _, kinds, _ in DETAILS
    }
    made: dict[str, list[str]] = {anchor: [] for anchor in newest}
    for r in records:
        for anchor, _, _, render in DETAILS:
            if id(r) in newest[anchor]:
                made[anchor].append(render(job, r))
    return made


DETAILS = (
    ("profiles-operators", "Top operators by self time", ("detailed", "deep"), operators_table),
    ("profiles-kernels", "Device time by kernel kind", ("detailed", "deep"), kernels_table),
    (
        "profiles-efficiency",
        "Operators against the card's peak",
        ("detailed", "deep"),
        efficiency_table,
    ),
    ("profiles-functions", "Top Python functions", ("python",), functions_table),
    ("profiles-dataloader", "Data loader", ("dataloader",), dataloader_table),
)


def profiles_section(ctx: Context, out_dir: str | None = None) -> str:
    """The job's profiling windows, or "" when it had none.

    ``out_dir`` is the folder the report is written to (None: the job folder),
    from which the links to the window files are made relative.
    """
    records = [r for r in ctx.job.profiling_artifacts() if isinstance(r, dict)]
    if not records:
        return ""
    links = Links(ctx.job, out_dir)
    intro = note(
        f"{len(records)} profiling windows. Open a trace file in {PERFETTO} (Open trace file) "
        "to see its timeline; a .pstats file in snakeviz or pstats. The links are relative "
        "to this report's folder: download the report together with the job's profiling/ "
        "folder. Times are those of each window's own profiler."
    )
    body = intro + _windows_table(records, links)
    made = _made_by_window(ctx.job, records)
    for anchor, title, kinds, _ in DETAILS:
        mine = [r for r in records if r.get("kind") in kinds]
        if mine:
            body += section(anchor, title, _detail_blocks(mine, made[anchor]), level=3)
    body += memory_section(records, links)
    return section("profiles", "Profiling windows", body)
