"""The report's data-loader window block: batches, workers, and a TensorFlow job's
``tf.data`` pipeline stages (``_profile_data``)."""

from __future__ import annotations

from stepscope.jobfolder import JsonObject
from stepscope.read import Job
from stepscope.report import _profile_data as data
from stepscope.report._html import fmt_duration, note, table


def _s(v: object) -> str:
    return fmt_duration(data.num(v))


def dataloader_table(job: Job, record: JsonObject) -> str:
    summary, workers = data.dataloader(job, record)
    if not summary:
        return note("No data-loader summary was saved for this window.")
    facts = [
        ("Batches fetched", summary.get("batches")),
        ("Waiting for batches (total)", _s(summary.get("wait_total_s"))),
        (
            "Wait per batch, median / max",
            f"{_s(summary.get('wait_p50_s'))} / {_s(summary.get('wait_max_s'))}",
        ),
        ("Window length", _s(summary.get("window_s"))),
        ("Worker processes", summary.get("workers")),
    ]
    out = table(["", ""], facts, cls="facts") + _tf_data_note(summary)
    if workers:
        rows = [
            (
                w.get("pid"),
                w.get("name"),
                _s(w.get("cpu_s")),
                f"{data.num(w.get('cpu_percent')) or 0:.0f}%",
            )
            for w in workers
        ]
        out += table(["Worker pid", "Name", "CPU time", "CPU"], rows, cls="num workers")
    return out + _stages_table(job, record)


def _tf_data_note(summary: JsonObject) -> str:
    """Where a TensorFlow window's waits came from, or why it has no tf.data events."""
    info = summary.get("tf_data")
    if not isinstance(info, dict):
        return ""
    if info.get("reason"):
        return note(f"tf.data: {info.get('reason')}")
    if info.get("waits_from") == "tf.data":
        return note("The waits are the GetNext calls of the tf.data pipeline's root iterator.")
    return ""


def _stages_table(job: Job, record: JsonObject) -> str:
    stages = data.tf_data_stages(job, record)
    if not stages:
        return ""
    rows = [
        (
            s.get("stage"),
            s.get("count"),
            _s(s.get("total_s")),
            _s(s.get("median_s")),
            _s(s.get("max_s")),
        )
        for s in stages
    ]
    head = ["tf.data stage", "GetNext calls", "Total", "Median", "Max"]
    return table(head, rows, cls="num tfdata-stages")
