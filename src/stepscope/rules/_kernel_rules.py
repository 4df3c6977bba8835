"""GPUIdleInSteps and CopiesNotOverlapped: the device idle inside a detailed window's
steps, and host-device copies that run alone (docs/rules.md, "Inside the GPU")."""

from __future__ import annotations

import statistics

from stepscope.read import DeviceBusy, KernelBreakdown, breakdown, kind_of
from stepscope.rules._params import Param
from stepscope.rules._trace_rule import (
    US,
    Judged,
    TraceRule,
    by_device,
    exposed,
    ms,
    span,
    window_steps,
)
from stepscope.rules._trace_source import TraceWindow
from stepscope.rules._types import Finding

HOST_COPIES = ("memcpy_htod", "memcpy_dtoh")


class GPUIdleInSteps(TraceRule):
    """Per window and device: the share of the device's active span (first kernel to
    last) with nothing running on any stream; launch-bound when the kernels are short."""

    name = "GPUIdleInSteps"
    description = (
        "The GPU sits idle between kernels inside the profiled steps: the host does not "
        "launch work fast enough (launch-bound) or stalls."
    )
    recommendation = (
        "Many short kernels with gaps between them (launch-bound): give each launch more "
        "work (a larger batch), replay the step as a CUDA graph (torch.compile(mode="
        "'reduce-overhead') or torch.cuda.graphs), or fuse kernels with torch.compile. Long "
        "gaps: look at the host operator named at the longest gap (a .item(), a sync, data "
        "loading) and move it off the step."
    )
    params = (
        Param("idle_share", 20.0, "share of the device's active span it sat idle, %"),
        Param("short_kernel_us", 20.0, "median kernel duration below which it is launch-bound, us"),
    )

    def judge(self, window: TraceWindow) -> Judged | None:
        result = breakdown(window.trace, top=1)
        if not isinstance(result, KernelBreakdown):
            return None
        judged = Judged(datapoints=len(window.trace.device))
        for busy in result.devices:
            share = 100.0 * (1.0 - (busy.busy_share or 1.0))
            if share < self.p_float("idle_share"):
                continue
            judged.cost_per_step += busy.idle_seconds / window.steps
            judged.findings.append(self._finding(window, busy.device, share, busy))
        return judged

    def _finding(self, window: TraceWindow, device: int, share: float, busy: DeviceBusy) -> Finding:
        kernels = [e.dur for e in window.trace.device if e.device == device and e.cat == "kernel"]
        median = statistics.median(kernels) if kernels else 0.0
        idle, gaps = busy.idle_seconds, busy.gaps
        longest, op = busy.longest_gap_seconds, busy.longest_gap_operator
        launch_bound = median < self.p_float("short_kernel_us")
        why = (
            f"launch-bound: {len(kernels)} kernels of median {median:.1f} us"
            if launch_bound
            else f"{len(kernels)} kernels of median {median:.0f} us, the host stalls"
        )
        at = f"; longest gap {ms(longest)} during {op}" if longest and op else ""
        return Finding(
            f"{window.label}, GPU {device}: idle {share:.0f}% of its active span "
            f"({ms(idle)} in {gaps} gaps; >= {self.p_float('idle_share'):g}%), {why}{at}",
            self.recommendation,
            min(1.0, share / 100.0),
            device=f"gpu{device}",
            rank=window.rank,
            steps=window_steps(window),
            value=share,
            threshold=self.p_float("idle_share"),
        )


class CopiesNotOverlapped(TraceRule):
    """Per window and device: host-device copies (host to device, device to host) not
    covered by kernels on other streams, as a share of the device's active span; the
    copies from pageable memory (never asynchronous) are named."""

    name = "CopiesNotOverlapped"
    description = "Host-device copies run alone on the GPU (not overlapped with kernels)."
    recommendation = (
        "Copy from pinned memory without blocking: DataLoader(pin_memory=True) and "
        "tensor.to(device, non_blocking=True); prefetch the next batch on a side stream "
        "so its copy overlaps this step's kernels."
    )
    needs_text = "no host-device copies in the traces"
    params = (Param("copy_share", 5.0, "share of the device's active span copies ran alone, %"),)

    def judge(self, window: TraceWindow) -> Judged | None:
        events = window.trace.device
        copies = [e for e in events if kind_of(e.cat, e.name) in HOST_COPIES]
        if not copies:
            return None
        judged = Judged(datapoints=len(copies))
        for device, mine in by_device(events).items():
            own = [e for e in copies if e.device == device]
            kernels = [e for e in mine if e.cat == "kernel"]
            alone = exposed(own, kernels) * US
            active = span(mine) * US
            share = 100.0 * alone / active if active > 0 else 0.0
            if not own or share < self.p_float("copy_share"):
                continue
            judged.cost_per_step += alone / window.steps
            pageable = sum(e.memory == "pageable" for e in own)
            judged.findings.append(
                Finding(
                    f"{window.label}, GPU {device}: {len(own)} host-device copies ran "
                    f"{ms(alone)} alone ({share:.0f}% of the active span; >= "
                    f"{self.p_float('copy_share'):g}%), {pageable} of them from pageable memory",
                    self.recommendation,
                    min(1.0, share / 50.0),
                    device=f"gpu{device}",
                    rank=window.rank,
                    steps=window_steps(window),
                    value=share,
                    threshold=self.p_float("copy_share"),
                )
            )
        return judged
