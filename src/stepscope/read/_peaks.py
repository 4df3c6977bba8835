"""Peak throughput of known GPUs, per precision, for the roofline of
docs/profiling.md ("Efficiency against the hardware").

Figures are the vendor's datasheet numbers for dense work (the datasheets print the
tensor-core figures "with sparsity": those are halved here, as dense matrix
multiplies never reach them). TFLOP/s per precision; ``fp32`` is the plain CUDA-core
rate (what an fp32 matrix multiply gets without TF32), ``tf32``/``bf16``/``fp16``/
``fp8`` the tensor cores'. Memory bandwidth in TB/s. A card not in the table has no
peak: its efficiency says "unknown card", never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_CARD = "unknown card"


@dataclass(frozen=True)
class Peaks:
    """One card's peaks: ``tflops`` by precision, ``tbps`` of its memory."""

    card: str
    tflops: dict[str, float]
    tbps: float

    def ridge(self, precision: str) -> float | None:
        """FLOPs per byte above which work at ``precision`` is compute-bound."""
        peak = self.tflops.get(precision)
        return peak / self.tbps if peak else None

    @property
    def tensor_cores(self) -> bool:
        """Whether an fp32 matrix multiply could run faster on tensor cores."""
        return any(p in self.tflops for p in ("tf32", "bf16"))


def _tc(fp32: float, tf32: float | None, half: float, fp8: float | None = None) -> dict[str, float]:
    out = {"fp32": fp32, "fp16": half, "bf16": half}
    if tf32:
        out["tf32"] = tf32
    if fp8:
        out["fp8"] = fp8
    return out


# Matched on the lower-cased NVML/CUDA device name, first fragment that matches wins.
_TABLE: tuple[tuple[str, Peaks], ...] = (
    # NVIDIA H200 datasheet (SXM): FP32 67 TF, TF32 989 / BF16 1,979 / FP8 3,958 TF
    # with sparsity, HBM3e 4.8 TB/s. H200 NVL: FP32 60, TF32 835 / BF16 1,671 sparse.
    ("h200 nvl", Peaks("NVIDIA H200 NVL", _tc(60.0, 417.5, 835.5, 1671.0), 4.8)),
    ("h200", Peaks("NVIDIA H200 SXM", _tc(67.0, 494.5, 989.5, 1979.0), 4.8)),
    # NVIDIA H100 datasheet: PCIe FP32 51, TF32 756 / BF16 1,513 sparse, 2.0 TB/s;
    # SXM ("H100 80GB HBM3") FP32 67, TF32 989 / BF16 1,979 sparse, 3.35 TB/s.
    ("h100 pcie", Peaks("NVIDIA H100 PCIe", _tc(51.0, 378.0, 756.5, 1513.0), 2.0)),
    ("h100", Peaks("NVIDIA H100 SXM", _tc(67.0, 494.5, 989.5, 1979.0), 3.35)),
    # NVIDIA A100 datasheet: FP32 19.5, TF32 312 / BF16 624 sparse; 80GB SXM 2,039 GB/s,
    # 80GB PCIe 1,935 GB/s, 40GB 1,555 GB/s.
    ("a100-sxm4-80gb", Peaks("NVIDIA A100 SXM 80GB", _tc(19.5, 156.0, 312.0), 2.039)),
    ("a100 80gb pcie", Peaks("NVIDIA A100 PCIe 80GB", _tc(19.5, 156.0, 312.0), 1.935)),
    ("a100", Peaks("NVIDIA A100 40GB", _tc(19.5, 156.0, 312.0), 1.555)),
    # NVIDIA L40S datasheet: FP32 91.6, TF32 366 / BF16 733 / FP8 1,466 sparse, 864 GB/s.
    ("l40s", Peaks("NVIDIA L40S", _tc(91.6, 183.0, 366.5, 733.0), 0.864)),
    # NVIDIA L4 datasheet: FP32 30.3, TF32 120 / BF16 242 / FP8 485 sparse, 300 GB/s.
    ("l4", Peaks("NVIDIA L4", _tc(30.3, 60.0, 121.0, 242.5), 0.3)),
    # NVIDIA A10 datasheet: FP32 31.2, TF32 125 / BF16 250 sparse, 600 GB/s.
    ("a10", Peaks("NVIDIA A10", _tc(31.2, 62.5, 125.0), 0.6)),
    # NVIDIA V100 SXM2 datasheet: FP32 15.7, FP16 tensor 125, 900 GB/s (no TF32/BF16).
    ("v100", Peaks("NVIDIA V100", {"fp32": 15.7, "fp16": 125.0}, 0.9)),
    # NVIDIA T4 datasheet: FP32 8.1, FP16 mixed 65, 320 GB/s (no TF32/BF16).
    ("t4", Peaks("NVIDIA T4", {"fp32": 8.1, "fp16": 65.0}, 0.32)),
)


def peaks_of(card: str | None) -> Peaks | None:
    """The peaks of the card named ``card`` (``"NVIDIA H200"``), None when unknown.

    ``a10`` must not match ``a100`` and ``l4`` not ``l40s``: a fragment matches only
    where the name does not go on with a digit or a letter.
    """
    if not card:
        return None
    low = card.lower()
    for fragment, peaks in _TABLE:
        at = low.find(fragment)
        after = low[at + len(fragment) : at + len(fragment) + 1] if at >= 0 else ""
        if at >= 0 and not after.isalnum():
            return peaks
    return None
