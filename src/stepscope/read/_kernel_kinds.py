"""Which kind of work a device event is: the classification table of docs/profiling.md
("Kernel breakdown"). Pure: a category and a name in, a kind out."""

from __future__ import annotations

KINDS = (
    "matmul",
    "attention",
    "elementwise",
    "memcpy_htod",
    "memcpy_dtoh",
    "memcpy_dtod",
    "memset",
    "communication",
    "other",
)

# Kernel name fragments (lower case), tried in this order: the first kind with a match
# wins. Communication first (NCCL's kernels are named after reductions), attention
# before matmul (flash attention kernels are built from CUTLASS's).
_BY_NAME: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "communication",
        (
            *("nccl", "rccl", "allreduce", "all_reduce", "allgather", "all_gather"),
            *("reducescatter", "reduce_scatter", "alltoall", "sendrecv", "cross_device_reduce"),
        ),
    ),
    ("attention", ("flash", "fmha", "attention", "attn", "mha_")),
    (
        "matmul",
        (
            *("gemm", "gemv", "cutlass", "xmma", "cublas", "matmul", "nvjet", "conv", "cudnn"),
            *("wgrad", "dgrad", "winograd", "triton_tem"),
        ),
    ),
    (
        "elementwise",
        (
            *("elementwise", "reduce", "multi_tensor_apply", "vectorized", "unrolled", "fill"),
            *("copy_kernel", "softmax", "norm", "index", "scatter", "gather", "cat_", "sort"),
            *("triton_poi", "triton_red", "triton_per", "pointwise"),
        ),
    ),
)

_COPY_DIRECTIONS = (
    ("htod", "memcpy_htod"),
    ("dtoh", "memcpy_dtoh"),
    ("dtod", "memcpy_dtod"),
    ("ptop", "memcpy_dtod"),  # peer to peer: one device to another
)


def kind_of(cat: str, name: str) -> str:
    """The kind of a device event of Kineto category ``cat`` named ``name``."""
    low = name.lower()
    if cat == "gpu_memset":
        return "memset"
    if cat == "gpu_memcpy":
        for fragment, kind in _COPY_DIRECTIONS:
            if fragment in low:
                return kind
        return "other"  # host to host, or a direction the name does not say
    for kind, fragments in _BY_NAME:
        if any(f in low for f in fragments):
            return kind
    return "other"
