"""GPUIdleInSteps and FP32MatMul: where a detailed window's device time goes, idle
between kernels, and fp32 matrix multiplies on CUDA cores of a card with tensor cores
(docs/rules.md, "Inside the GPU")."""

from __future__ import annotations

import statistics

from stepscope.read import DeviceBusy, KernelBreakdown, kind_of, peaks_of
from stepscope.rules._device_intervals import US, by_device
from stepscope.rules._params import Param
from stepscope.rules._trace_rule import Judged, TraceRule, ms
from stepscope.rules._trace_source import TraceWindow
from stepscope.rules._types import Finding

# Kernel names of fp32 GEMMs on CUDA cores (cuBLAS "sgemm", "..._f32f32_f32f32_f32_...
# ffma", CUTLASS "simt_sgemm"), and of the ones that use tensor cores (not these).
_FP32 = ("sgemm", "ffma", "f32f32_f32f32_f32")
_TENSOR_CORES = ("tf32", "tensorop", "hmma", "bf16", "f16", "e4m3", "e5m2", "i8")


def fp32_on_cuda_cores(name: str) -> bool:
    """Whether the kernel ``name`` is an fp32 matrix multiply on CUDA cores."""
    low = name.lower()
    return any(m in low for m in _FP32) and not any(m in low for m in _TENSOR_CORES)


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
        result = window.kernels()
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
        return self.device_finding(
            window,
            device,
            f"{window.label}, GPU {device}: idle {share:.0f}% of its active span "
            f"({ms(idle)} in {gaps} gaps; >= {self.p_float('idle_share'):g}%), {why}{at}",
            share,
            100.0,
            "idle_share",
        )


class FP32MatMul(TraceRule):
    """Per window and device of a card with tensor cores (the peak table of
    docs/profiling.md): the share of kernel time in fp32 matrix multiplies on CUDA
    cores; their cost is what TF32 tensor cores would save at the same share of peak."""

    name = "FP32MatMul"
    description = "Matrix multiplies run in fp32 on CUDA cores of a card with tensor cores."
    recommendation = (
        "Let fp32 matrix multiplies use TF32 tensor cores: torch.backends.cuda.matmul."
        "allow_tf32 = True (or torch.set_float32_matmul_precision('high')), or train in "
        "bf16 autocast: with torch.autocast('cuda', dtype=torch.bfloat16)."
    )
    needs_text = "the traces' cards are not in the peak table (unknown card)"
    params = (Param("matmul_share", 10.0, "share of kernel time in fp32 CUDA-core GEMMs, %"),)

    def judge(self, window: TraceWindow) -> Judged | None:
        judged: Judged | None = None
        for device, mine in by_device(window.trace.device).items():
            peaks = peaks_of(window.trace.device_names.get(device))
            if peaks is None:
                continue
            kernels = [e for e in mine if e.cat == "kernel"]
            judged = judged or Judged()
            judged.datapoints += sum(kind_of(e.cat, e.name) == "matmul" for e in kernels)
            fp32 = sum(e.dur for e in kernels if fp32_on_cuda_cores(e.name)) * US
            busy = sum(e.dur for e in kernels) * US
            share = 100.0 * fp32 / busy if busy > 0 else 0.0
            faster = peaks.tflops.get("tf32") or peaks.tflops.get("bf16")
            if not peaks.tensor_cores or not faster or share < self.p_float("matmul_share"):
                continue
            saved = fp32 * (1.0 - peaks.tflops["fp32"] / faster)
            judged.cost_per_step += saved / window.steps
            judged.findings.append(
                self.device_finding(
                    window,
                    device,
                    f"{window.label}, GPU {device} ({peaks.card}): fp32 matrix multiplies on "
                    f"CUDA cores took {ms(fp32)}, {share:.0f}% of kernel time (>= "
                    f"{self.p_float('matmul_share'):g}%); at the same share of the TF32 "
                    f"peak ({faster:g} vs {peaks.tflops['fp32']:g} TFLOP/s) about "
                    f"{ms(fp32 - saved)}",
                    share,
                    100.0,
                    "matmul_share",
                )
            )
        return judged
