"""Plain-text rendering of a job's summary: what ``stepscope show`` and ``Job.show()`` print."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from stepscope.analysis.diagnosis_text import cpu_text

if TYPE_CHECKING:
    from stepscope.analysis.device import DeviceSplit
    from stepscope.analysis.diagnosis_text import EntryJson
    from stepscope.analysis.summary import JobSummary, Quantiles, StepsSummary, SystemSummary

DIAGNOSIS_SHOWN = 3  # problems on the first screen; show --json and the report have all
FIX_CHARS = 110

_SHOWN_METRICS = (
    ("cpu", "CPU total", "%"),
    ("cpu_iowait", "I/O wait", "%"),
    ("mem_used", "memory used", "B"),
    ("disk_read_bps", "disk read", "B/s"),
    ("disk_write_bps", "disk write", "B/s"),
    ("net_rx_bps", "network rx", "B/s"),
    ("net_tx_bps", "network tx", "B/s"),
    ("proc_cpu_node", "training CPU", "%"),
    ("proc_rss", "training memory", "B"),
    ("others_cpu", "other processes' CPU", "%"),
    ("own_cpu_node", "stepscope's own CPU", "%"),
    ("cpu_steal", "CPU steal", "%"),
)


def human_bytes(x: float) -> str:
    for unit in ("", "K", "M", "G", "T"):
        if abs(x) < 1024 or unit == "T":
            return f"{x:.1f} {unit}" if unit else f"{x:.0f} "
        x /= 1024
    return f"{x:.1f}"


def fmt_value(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    if unit.startswith("B"):
        return human_bytes(x) + unit
    return f"{x:.1f} {unit}"


def fmt_seconds(x: float | None) -> str:
    if x is None:
        return "-"
    if x < 1:
        return f"{x * 1000:.2f} ms"
    if x < 120:
        return f"{x:.2f} s"
    return f"{x / 60:.1f} min"


def _kernels_line(k: object) -> list[str]:
    """A window's kernel breakdown in one line (docs/profiling.md), none without one."""
    if not isinstance(k, dict) or "not_applicable" in k:
        return [f"           device: {k['not_applicable']}"] if isinstance(k, dict) else []
    total = sum(x["seconds"] for x in k["kinds"])  # 0: only zero-length events
    kinds = ", ".join(
        f"{x['kind']} {x['seconds'] / total:.0%}" if total else x["kind"] for x in k["kinds"][:4]
    )
    busy = [_device_text(d) for d in k["devices"]]
    return [f"           device: {kinds}; {'; '.join(busy)}"]


def _device_text(d: dict[str, Any]) -> str:
    share = "-" if d["busy_share"] is None else f"{d['busy_share']:.0%}"
    longest = f"{fmt_seconds(d['longest_gap_seconds'])} during {d['longest_gap_operator']}"
    gaps = f"{d['gaps']} gaps (longest {longest})" if d["gaps"] else "no gaps"
    return f"GPU {d['device']} busy {share} of {fmt_seconds(d['span_seconds'])}, {gaps}"


def _gpu_metrics(metrics: Mapping[str, Quantiles]) -> list[tuple[str, str, str]]:
    units = {"util": "%", "mem_util": "%", "mem_used": "B", "power_w": "W", "temp_c": "C"}
    out = []
    for name in sorted(metrics):
        if name.startswith("gpu") and "_" in name:
            kind = name.split("_", 1)[1]
            if kind == "mem_used" and name.replace("_mem_used", "_mem_util") in metrics:
                continue  # shown beside the memory %
            if kind in units:
                out.append((name, name, units[kind]))
    return out


def _short(text: str, chars: int = FIX_CHARS) -> str:
    return text if len(text) <= chars else text[:chars].rsplit(" ", 1)[0] + " ..."


def render_diagnosis(entries: list[EntryJson], summary: str, path: str) -> list[str]:
    """The first lines of ``show``: the costliest problems with their fix, or what was
    checked when none was found."""
    lines = [f"diagnosis  {summary}"]
    for i, e in enumerate(entries[:DIAGNOSIS_SHOWN], 1):
        lines.append(f"  {i}. {e['message']}")
        if e["recommendation"]:
            lines.append(f"     fix: {_short(e['recommendation'])}")
    if len(entries) > DIAGNOSIS_SHOWN:
        lines.append(f"  ... and {len(entries) - DIAGNOSIS_SHOWN} more")
    if entries:
        lines.append(f"  evidence: stepscope rules {path}, or the report's Diagnosis section")
    return [*lines, ""]


def job_state(s: JobSummary) -> str:
    """Which of the three a job is: still running, ended, or lost with its launcher."""
    if s["status"] == "Running":
        return "still running"
    if s["status"] == "Unknown" and s.get("end_time") is None:
        return "launcher lost, training state unknown"
    return "ended"


def render_show(s: JobSummary) -> str:
    checks = s["diagnosis_checks"]
    lines = render_diagnosis(s["diagnosis"], checks["summary"], s["path"])
    lines += [
        f"job        {s['name']}   ({s['path']})",
        f"status     {s['status']} ({job_state(s)})"
        + (f"   exit code {s['exit_code']}" if s["exit_code"] is not None else "")
        + (f"   reason: {s['reason']}" if s.get("reason") else ""),
        *([f"data       INCOMPLETE: {s['incomplete']}"] if s.get("incomplete") else []),
        f"command    {' '.join(s['command'] or [])}",
        f"duration   {fmt_seconds(s['duration_seconds'])}   init {fmt_seconds(s['init_seconds'])}"
        f"   finalization {fmt_seconds(s['finalization_seconds'])}",
        "",
    ]
    lines += _render_steps(s["steps"])
    lines += _render_system(s["system"])
    for w in s.get("profiling", []):
        cut = "   (cut: over file_max_size)" if w["truncated"] else ""
        lines.append(
            f"profiling  {w['kind']:<10} rank {w['rank']}   steps {w['start_step']}-"
            f"{w['end_step']}   {w['path'] or w.get('note')}{cut}"
        )
        lines += _kernels_line(w.get("kernels"))
    for f in s["faults"]:
        lines.append(f"FAULT      {f.get('component')}: {f.get('error')} (x{f.get('count', 1)})")
    lines += [f"WARNING    {w}" for w in s.get("warnings", [])]
    return "\n".join(lines)


def _render_steps(st: StepsSummary) -> list[str]:
    ranks = ", ".join(f"rank {r}: {n}" for r, n in st["by_rank"].items())
    head = f"steps      {st['count']} training steps (rank 0)"
    lines = [head + (f"   [{ranks}]" if ranks else "")]
    for phase, ph in st["phases"].items():
        d = ph["duration"]
        lines.append(
            f"  {phase:<6} {ph['count']:>7} steps   p50 {fmt_seconds(d['p50'])}"
            f"   p95 {fmt_seconds(d['p95'])}"
        )
        split = "  ".join(
            f"{k} {'unknown' if v is None else f'{100 * v:.1f}%'}" for k, v in ph["split"].items()
        )
        device = ph.get("device")
        if device is None:
            lines.append(f"         split: {split}")
        else:  # on a GPU the device's split leads: the host's parts are launch times
            lines += [*_render_device(device), f"         host split: {split}"]
    return [*lines, ""]


def _render_device(d: DeviceSplit) -> list[str]:
    """The device split of a phase, and the line saying the host ran ahead (docs/gpu.md)."""
    from stepscope.analysis.device import busy_text, ran_ahead_text, split_text

    lines = [f"         device split: {split_text(d)}", f"         device: {busy_text(d)}"]
    ahead = ran_ahead_text(d)
    return lines if ahead is None else [*lines, f"         {ahead}"]


def _render_system(sy: SystemSummary) -> list[str]:
    lines = []
    for node, info in sy["nodes"].items():
        lines.append(
            f"system     {node}: {info['samples']} samples every {info['interval_ms']} ms"
            f"{'':10}p50        p95"
        )
        metrics, cores = info["metrics"], info.get("cores")
        shown: tuple[tuple[str, str, str], ...] = _SHOWN_METRICS
        for key, label in _PER_CORE:  # no core count: the CPU as recorded, of one core
            if f"{key}_node" not in metrics:
                as_recorded = (key, f"{label} (% of a core)", "%")
                shown = tuple(as_recorded if m[0] == f"{key}_node" else m for m in shown)
        rows = [
            (
                label,
                _metric_cell(metrics, key, unit, "p50", cores),
                _metric_cell(metrics, key, unit, "p95", cores),
            )
            for key, label, unit in (*shown, *_gpu_metrics(metrics))
            if key in metrics
        ]
        # as wide as before, unless a GPU's memory (% and GB) needs more
        w50 = max([14, *(len(r[1]) for r in rows)])
        w95 = max([12, *(len(r[2]) for r in rows)])
        lines += [f"  {label:<22}{p50:>{w50}} {p95:>{w95}}" for label, p50, p95 in rows]
    return lines or ["system     no samples"]


# CPU of the node (% of all its cores): shown with the cores it amounts to.
_NODE_CPU = ("cpu", "proc_cpu_node", "others_cpu", "own_cpu_node")
# Recorded as % of one core summed: shown as % of the node where the cores are known.
_PER_CORE = (("proc_cpu", "training CPU"), ("own_cpu", "stepscope's own CPU"))


def _metric_cell(
    metrics: Mapping[str, Quantiles],
    key: str,
    unit: str,
    q: Literal["p50", "p95"],
    cores: int | None = None,
) -> str:
    """One quantile of a metric; a GPU's memory % with its bytes beside it; the node's
    CPU (% of the node) with the cores in brackets."""
    value = metrics[key][q]
    if key in _NODE_CPU and value is not None and cores:
        return cpu_text(value, cores, unit=" %")
    text = fmt_value(value, unit)
    used = key.removesuffix("_mem_util") + "_mem_used"
    if key.endswith("_mem_util") and used in metrics:
        got = metrics[used][q]
        text += f" ({fmt_value(got, 'B')})" if got is not None else ""
    return text
