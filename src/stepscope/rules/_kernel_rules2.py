"""CommunicationNotOverlapped and FP32MatMul: collective kernels that run alone, and
fp32 matrix multiplies on CUDA cores of a card with tensor cores (docs/rules.md,
"Inside the GPU")."""

from __future__ import annotations

from stepscope.read import kind_of, peaks_of
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

# Kernel names of fp32 GEMMs on CUDA cores (cuBLAS "sgemm", "..._f32f32_f32f32_f32_...
# ffma", CUTLASS "simt_sgemm"), and of the ones that use tensor cores (not these).
_FP32 = ("sgemm", "ffma", "f32f32_f32f32_f32")
_TENSOR_CORES = ("tf32", "tensorop", "hmma", "bf16", "f16", "e4m3", "e5m2", "i8")


def fp32_on_cuda_cores(name: str) -> bool:
    """Whether the kernel ``name`` is an fp32 matrix multiply on CUDA cores."""
    low = name.lower()
    return any(m in low for m in _FP32) and not any(m in low for m in _TENSOR_CORES)


class CommunicationNotOverlapped(TraceRule):
    """Per window and device: the time collective kernels (NCCL) ran with no compute
    kernel on another stream, as a share of the device's active span."""

    name = "CommunicationNotOverlapped"
    description = "Collective communication (NCCL) runs alone, not hidden behind computation."
    recommendation = (
        "Let gradients' all-reduce overlap the backward pass: DDP's bucket_cap_mb (smaller "
        "buckets start sooner), no_sync() for gradient accumulation steps, FSDP's "
        "backward_prefetch/forward_prefetch; avoid a synchronisation (.item(), a barrier) "
        "between the backward pass and the optimizer."
    )
    needs_text = "no communication kernels in the traces (not a distributed GPU job)"
    params = (Param("exposed_share", 10.0, "share of the active span collectives ran alone, %"),)

    def judge(self, window: TraceWindow) -> Judged | None:
        events = window.trace.device
        comm = [
            e for e in events if e.cat == "kernel" and kind_of(e.cat, e.name) == "communication"
        ]
        if not comm:
            return None
        judged = Judged(datapoints=len(comm))
        for device, mine in by_device(events).items():
            own = [e for e in comm if e.device == device]
            mine_comm = {id(e) for e in own}
            compute = [e for e in mine if e.cat == "kernel" and id(e) not in mine_comm]
            alone, active = exposed(own, compute) * US, span(mine) * US
            share = 100.0 * alone / active if active > 0 else 0.0
            if not own or share < self.p_float("exposed_share"):
                continue
            judged.cost_per_step += alone / window.steps
            total = sum(e.dur for e in own) * US
            judged.findings.append(
                Finding(
                    f"{window.label}, GPU {device}: {len(own)} collective kernels ran "
                    f"{ms(total)}, {ms(alone)} of it with no computation beside it "
                    f"({share:.0f}% of the active span; >= {self.p_float('exposed_share'):g}%)",
                    self.recommendation,
                    min(1.0, share / 50.0),
                    device=f"gpu{device}",
                    rank=window.rank,
                    steps=window_steps(window),
                    value=share,
                    threshold=self.p_float("exposed_share"),
                )
            )
        return judged


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
                Finding(
                    f"{window.label}, GPU {device} ({peaks.card}): fp32 matrix multiplies on "
                    f"CUDA cores took {ms(fp32)}, {share:.0f}% of kernel time (>= "
                    f"{self.p_float('matmul_share'):g}%); at the same share of the TF32 "
                    f"peak ({faster:g} vs {peaks.tflops['fp32']:g} TFLOP/s) about "
                    f"{ms(fp32 - saved)}",
                    self.recommendation,
                    min(1.0, share / 100.0),
                    device=f"gpu{device}",
                    rank=window.rank,
                    steps=window_steps(window),
                    value=share,
                    threshold=self.p_float("matmul_share"),
                )
            )
        return judged
