"""CopiesNotOverlapped and CommunicationNotOverlapped: host-device copies and
collective kernels that run alone on the device, with no kernel on another stream
beside them (docs/rules.md, "Inside the GPU")."""

from __future__ import annotations

from stepscope.read import kind_of
from stepscope.rules._device_intervals import US, Alone
from stepscope.rules._params import Param
from stepscope.rules._trace_rule import Judged, TraceRule, ms
from stepscope.rules._trace_source import TraceWindow

HOST_COPIES = ("memcpy_htod", "memcpy_dtoh")


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
        copies = [e for e in window.trace.device if kind_of(e.cat, e.name) in HOST_COPIES]
        if not copies:
            return None
        return self.judge_alone(window, copies, "copy_share", self._say)

    def _say(self, alone: Alone) -> str:
        pageable = sum(e.memory == "pageable" for e in alone.own)
        return (
            f"{len(alone.own)} host-device copies ran {ms(alone.seconds)} alone "
            f"({alone.share:.0f}% of the active span; >= {self.p_float('copy_share'):g}%), "
            f"{pageable} of them from pageable memory"
        )


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
        comm = [
            e
            for e in window.trace.device
            if e.cat == "kernel" and kind_of(e.cat, e.name) == "communication"
        ]
        if not comm:
            return None
        return self.judge_alone(window, comm, "exposed_share", self._say)

    def _say(self, alone: Alone) -> str:
        total = sum(e.dur for e in alone.own) * US
        return (
            f"{len(alone.own)} collective kernels ran {ms(total)}, {ms(alone.seconds)} of it "
            f"with no computation beside it ({alone.share:.0f}% of the active span; >= "
            f"{self.p_float('exposed_share'):g}%)"
        )
