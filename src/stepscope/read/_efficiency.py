"""Efficiency against the hardware of one PyTorch profiler trace (docs/profiling.md,
"Efficiency against the hardware").

Per operator (name, precision and input shapes): its work from the recorded shapes
(:mod:`._flops`) or the profiler's FLOP count, the time it took (the device time of
the kernels it launched; on a trace without device activity, its host time), the
achieved TFLOP/s and TB/s, its arithmetic intensity against the card's ridge point
(compute- or memory-bound) and the share of the card's peak (:mod:`._peaks`).
A trace recorded without shapes gives :class:`NoEfficiency`, never a guess.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass

from stepscope.read._flops import Work, has_flops, is_known, kind_of_op, work_of
from stepscope.read._kernels import US, innermost
from stepscope.read._peaks import UNKNOWN_CARD, Peaks, peaks_of
from stepscope.read._trace import HostEvent, ShapedOp, Trace

NO_SHAPES = "unknown (shapes not recorded)"


@dataclass(frozen=True)
class OpEfficiency:
    """One operator at one precision and input shapes, summed over its calls."""

    operator: str
    kind: str  # matmul, convolution, attention, elementwise
    precision: str  # fp32, tf32 (fp32 on tensor cores), bf16, fp16, fp8, ...
    shapes: str
    count: int
    seconds: float
    flops: float | None
    bytes: float | None
    tflops: float | None
    tbps: float | None
    intensity: float | None  # FLOPs per byte
    ridge: float | None  # the card's FLOPs per byte where compute starts to bound
    bound: str  # "compute", "memory", or why unknown
    peak_tflops: float | None
    peak_tbps: float | None
    share_of_peak: float | None  # achieved / the peak of what bounds it


@dataclass(frozen=True)
class Efficiency:
    """The efficiency of one trace's operators. ``timed_on``: "device" (kernel time)
    or "host" (a trace without device activity); ``card``: the device's name
    (None: not said); ``peaks``: the table entry used (None: unknown card)."""

    card: str | None
    peaks: str | None
    timed_on: str
    operators: list[OpEfficiency]

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class NoEfficiency:
    """Not applicable: why there is no efficiency (e.g. shapes not recorded)."""

    reason: str

    def to_json(self) -> dict[str, object]:
        return {"not_applicable": self.reason}


def efficiency(trace: Trace, card: str | None = None) -> Efficiency | NoEfficiency:
    """The efficiency of ``trace``'s operators on ``card`` (default: the name the
    trace gives its first device)."""
    ops = [op for op in trace.shaped if op.flops is not None or is_known(op.name)]
    if not ops:
        return NoEfficiency(NO_SHAPES if not trace.shaped else "no operator with known work")
    on_device = any(e.cat == "kernel" for e in trace.device)
    timed = _device_times(trace, ops) if on_device else _host_times(ops)
    if card is None and on_device:
        first = min(e.device for e in trace.device)
        card = trace.device_names.get(first)
    peaks = peaks_of(card)
    groups: dict[tuple[str, str, str], list[tuple[ShapedOp, Work, float]]] = defaultdict(list)
    for i, (seconds, tf32) in timed.items():
        work = _work(ops[i])
        if work is not None:
            precision = "tf32" if tf32 and work.precision == "fp32" else work.precision
            groups[(ops[i].name, precision, _shapes(ops[i]))].append((ops[i], work, seconds))
    rows = [_row(key, calls, peaks) for key, calls in groups.items()]
    rows.sort(key=lambda r: (-r.seconds, r.operator))
    return Efficiency(card, peaks.card if peaks else None, "device" if on_device else "host", rows)


def _work(op: ShapedOp) -> Work | None:
    work = work_of(op)
    if op.flops is None:
        return work
    # the profiler's own count wins; the kind and bytes from the shapes where known
    if work is None:
        return Work(kind_of_op(op.name), "unknown", op.flops, None)
    return Work(work.kind, work.precision, op.flops, work.bytes)


def _shapes(op: ShapedOp) -> str:
    return str([d for d in op.dims if isinstance(d, list) and d])


def _device_times(trace: Trace, ops: list[ShapedOp]) -> dict[int, tuple[float, bool]]:
    """Owner op index -> (device seconds of the kernels launched inside it; whether
    one of them ran on TF32 tensor cores, by its name)."""
    hosts = [HostEvent(str(i), op.tid, op.start, op.end, False) for i, op in enumerate(ops)]
    owner = owners(ops)
    out: dict[int, tuple[float, bool]] = {}
    by_tid: dict[str, list[tuple[float, str, float]]] = defaultdict(list)
    for e in trace.device:
        launch = trace.launches.get(e.correlation) if e.correlation is not None else None
        if e.cat == "kernel" and launch is not None:
            by_tid[launch[0]].append((launch[1], e.name, e.dur))
    for tid, launched in by_tid.items():
        found = innermost([h for h in hosts if h.tid == tid], [ts for ts, _, _ in launched])
        for (_, name, dur), host in zip(launched, found, strict=True):
            i = owner[int(host.name)] if host is not None else None
            if i is not None:
                seconds, tf32 = out.get(i, (0.0, False))
                out[i] = (seconds + dur * US, tf32 or "tf32" in name.lower())
    return out


def _host_times(ops: list[ShapedOp]) -> dict[int, tuple[float, bool]]:
    """Op index -> (host seconds, False) of the ops that own their time."""
    owner = owners(ops)
    return {i: ((op.end - op.start) * US, False) for i, op in enumerate(ops) if owner[i] == i}


def _row(
    key: tuple[str, str, str], calls: list[tuple[ShapedOp, Work, float]], peaks: Peaks | None
) -> OpEfficiency:
    name, precision, shapes = key
    kind = calls[0][1].kind
    seconds = sum(s for _, _, s in calls)
    flops = _total([w.flops for _, w, _ in calls])
    moved = _total([w.bytes for _, w, _ in calls])
    tflops = flops / seconds / 1e12 if flops is not None and seconds > 0 else None
    tbps = moved / seconds / 1e12 if moved is not None and seconds > 0 else None
    intensity = flops / moved if flops is not None and moved else None
    peak_tf = peaks.tflops.get(precision) if peaks else None
    peak_bw = peaks.tbps if peaks else None
    ridge = peaks.ridge(precision) if peaks else None
    bound = _bound(kind, intensity, ridge, peaks)
    share = None
    if bound == "compute" and tflops is not None and peak_tf:
        share = tflops / peak_tf
    elif bound == "memory" and tbps is not None and peak_bw:
        share = tbps / peak_bw
    return OpEfficiency(
        *(name, kind, precision, shapes, len(calls), seconds, flops, moved, tflops, tbps),
        *(intensity, ridge, bound, peak_tf, peak_bw, share),
    )


def _bound(kind: str, intensity: float | None, ridge: float | None, peaks: Peaks | None) -> str:
    if peaks is None:
        return UNKNOWN_CARD
    if kind == "elementwise":
        return "memory"  # no FLOPs worth counting: its bytes bound it
    if intensity is None:
        return "unknown (bytes not known)"
    if ridge is None:
        return "unknown (no peak for this precision)"
    return "compute" if intensity >= ridge else "memory"


def _total(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v or 0.0 for v in values)


# -- which operator owns the work (and the kernels) of a nested one ----------------
# A matrix multiply's own copies and fills are part of it, and no work is counted
# twice (aten::div inside aten::div; a math attention's bmm inside
# scaled_dot_product_attention).


def parents(ops: list[ShapedOp]) -> list[int | None]:
    """Index of the innermost op around each op on its thread (None: top level)."""
    out: list[int | None] = [None] * len(ops)
    for tid in {op.tid for op in ops}:
        stack: list[tuple[float, int]] = []  # (end, index) of the ops still open
        mine = sorted((op.start, -op.end, i) for i, op in enumerate(ops) if op.tid == tid)
        for start, neg_end, i in mine:
            while stack and stack[-1][0] < start:
                stack.pop()
            out[i] = stack[-1][1] if stack else None
            stack.append((-neg_end, i))
    return out


def owners(ops: list[ShapedOp]) -> list[int | None]:
    """Per op, the op its time is counted under (None: not counted).

    An op with FLOPs counts its own time unless another op with FLOPs is inside it
    (then the inner one counts); any other op counts under the nearest op with FLOPs
    around it, else its own unless a known op is inside it (the inner one counts).
    """
    up = parents(ops)
    flop = [has_flops(op) for op in ops]
    flop_inside, known_inside = [False] * len(ops), [False] * len(ops)
    for i in range(len(ops)):
        p = up[i]
        while p is not None and not (known_inside[p] and (flop_inside[p] or not flop[i])):
            known_inside[p] = True
            flop_inside[p] = flop_inside[p] or flop[i]
            p = up[p]
    out: list[int | None] = []
    for i in range(len(ops)):
        if flop[i]:
            out.append(None if flop_inside[i] else i)
            continue
        a = up[i]
        while a is not None and not flop[a]:
            a = up[a]
        if a is not None and not flop_inside[a]:
            out.append(a)
        else:
            out.append(None if known_inside[i] else i)
    return out
