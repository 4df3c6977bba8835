"""The report's kernel block of a detailed window: device time by kind, the device's
busy share and idle gaps, the top kernels with their operators (``Job.window_kernels``,
docs/profiling.md "Kernel breakdown"). Rendering only."""

from __future__ import annotations

from stepscope.jobfolder import JsonObject
from stepscope.read import DeviceBusy, Job, KernelBreakdown, NoKernels
from stepscope.report._html import fmt_duration, note, table

TOP = 10
NAME_CHARS = 120  # kernel names are whole C++ templates: the start tells them apart


def kernels_table(job: Job, record: JsonObject) -> str:
    result = job.window_kernels(record, TOP)
    if result is None:
        return note("This window kept no PyTorch trace.")
    if isinstance(result, NoKernels):
        return note(f"No kernel breakdown: {result.reason}.")
    return "".join(
        [
            *(note(_busy(d)) for d in result.devices),
            _kinds(result),
            _top(result),
        ]
    )


def _busy(d: DeviceBusy) -> str:
    share = "unknown" if d.busy_share is None else f"{d.busy_share:.0%}"
    text = f"GPU {d.device} was busy {share} of its active {fmt_duration(d.span_seconds)}"
    if not d.gaps:
        return text + ", with no idle gap."
    return (
        f"{text}; idle {fmt_duration(d.idle_seconds)} in {d.gaps} gaps, the longest "
        f"{fmt_duration(d.longest_gap_seconds)} while the host ran "
        f"{d.longest_gap_operator or 'nothing recorded'}."
    )


def _kinds(result: KernelBreakdown) -> str:
    total = sum(k.seconds for k in result.kinds)
    rows = [
        (
            k.kind,
            k.count,
            fmt_duration(k.seconds),
            f"{k.seconds / total:.1%}" if total else "\u2013",
            "\u2013" if k.gbps is None else f"{k.gbps:.1f} GB/s",
            "\u2013" if k.pageable is None else k.pageable,
        )
        for k in result.kinds
    ]
    head = ["Kind", "Count", "Device time", "Share", "Copy bandwidth", "From pageable memory"]
    return table(head, rows, cls="num kernels")


def _top(result: KernelBreakdown) -> str:
    rows = [
        (
            t.name if len(t.name) <= NAME_CHARS else t.name[:NAME_CHARS] + "\u2026",
            t.kind,
            t.count,
            fmt_duration(t.seconds),
            t.operator or "\u2013",
        )
        for t in result.top
    ]
    return table(["Kernel", "Kind", "Count", "Device time", "Launched by"], rows, cls="kernels")
