"""The work an operator does, from its recorded shapes (``record_shapes``): FLOPs and
bytes of matrix multiplies, convolutions and attention, bytes of elementwise ops
(docs/profiling.md, "Efficiency against the hardware"). Pure: a
:class:`~stepscope.read._trace.ShapedOp` in, a :class:`Work` or None out.

Bytes are the least traffic the op can do: each input read once and each output
written once. FLOPs count a multiply-add as two, as the PyTorch profiler does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from stepscope.read._trace import ShapedOp

# "Input type" text -> (precision, bytes per element)
_TYPES = {
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "int": ("int32", 4),
    "long int": ("int64", 8),
    "bool": ("bool", 1),
}
ELEMENTWISE = frozenset(
    f"aten::{n}"
    for n in (
        *("add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "exp", "pow"),
        *("sqrt", "rsqrt", "relu", "relu_", "gelu", "gelu_backward", "silu", "silu_"),
        *("silu_backward", "sigmoid", "tanh", "threshold_backward", "copy_", "fill_", "zero_"),
        *("addcmul_", "addcdiv_", "lerp_", "clamp", "clamp_", "where", "_softmax"),
        *("_softmax_backward_data", "native_layer_norm", "native_layer_norm_backward"),
    )
)
REDUCTIONS = frozenset(f"aten::{n}" for n in ("sum", "mean", "amax", "norm"))


class Work(NamedTuple):
    """What one operator does: its kind (``matmul``, ``convolution``, ``attention``,
    ``elementwise``), precision, FLOPs (None for memory ops) and bytes (None:
    not known from what was recorded)."""

    kind: str
    precision: str
    flops: float | None
    bytes: float | None


def _dims(op: ShapedOp, i: int) -> list[int] | None:
    d = op.dims[i] if i < len(op.dims) else None
    if not isinstance(d, list) or not all(isinstance(x, int) for x in d):
        return None
    return [int(x) for x in d]


def _type(op: ShapedOp, i: int) -> tuple[str, int] | None:
    t = op.types[i] if i < len(op.types) else None
    return _TYPES.get(t) if isinstance(t, str) else None


def _tensors(op: ShapedOp) -> list[tuple[int, int]]:
    """(elements, bytes per element) of each tensor input."""
    out = []
    for i in range(len(op.dims)):
        d, t = _dims(op, i), _type(op, i)
        if d is not None and t is not None:
            out.append((math.prod(d), t[1]))
    return out


def _matmul(op: ShapedOp, a: int) -> Work | None:
    """``a`` and ``a + 1`` are the two matrices ([B,] M, K) x ([B,] K, N)."""
    x, y, t = _dims(op, a), _dims(op, a + 1), _type(op, a)
    if x is None or y is None or t is None or len(x) != len(y) or len(x) not in (2, 3):
        return None
    batch = x[0] if len(x) == 3 else 1
    m, k, n = x[-2], x[-1], y[-1]
    moved = sum(e * s for e, s in _tensors(op)) + batch * m * n * t[1]
    return Work("matmul", t[0], 2.0 * batch * m * k * n, float(moved))


def _conv(op: ShapedOp, backward: bool) -> Work | None:
    """Forward: 2 * N * O * (output positions) * (C/groups * kernel): the output's
    size from the input's and the recorded stride/padding/dilation. Backward: twice
    that (the input's and the weight's gradients), its output size is its grad's."""
    first = 1 if backward else 0
    x, w, t = _dims(op, first), _dims(op, first + 1), _type(op, first)
    if x is None or w is None or t is None or len(x) < 3 or len(w) != len(x):
        return None
    if backward:
        out = _dims(op, 0)
    else:
        if _text(op, 6) == "True":  # transposed: another formula, not guessed
            return None
        out = _conv_out(x, w, [_ints(op, i) for i in (3, 4, 5)])
    if out is None:
        return None
    fwd = 2.0 * math.prod(out) * math.prod(w[1:])
    moved = (
        sum(e * s for e, s in _tensors(op))
        + ((math.prod(x) + math.prod(w)) if backward else math.prod(out)) * t[1]
    )
    return Work("convolution", t[0], 2 * fwd if backward else fwd, float(moved))


def _conv_out(x: list[int], w: list[int], sizes: list[list[int] | None]) -> list[int] | None:
    stride, padding, dilation = sizes
    space = len(x) - 2
    if any(s is None or len(s) != space for s in sizes):
        return None
    assert stride is not None and padding is not None and dilation is not None
    out = [
        (x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
        for i in range(space)
    ]
    return [x[0], w[0], *out]


def _attention(op: ShapedOp, backward: bool) -> Work | None:
    """Q·Kᵀ and P·V: 4 * B * H * L * S * D forward; the backward's five products 10."""
    first = 1 if backward else 0
    q, k, t = _dims(op, first), _dims(op, first + 1), _type(op, first)
    if q is None or k is None or t is None or len(q) != 4 or len(k) != 4:
        return None
    b, h, lq, d = q
    flops = (10.0 if backward else 4.0) * b * h * lq * k[2] * d
    moved = sum(e * s for e, s in _tensors(op)) + (3 if backward else 1) * math.prod(q) * t[1]
    return Work("attention", t[0], flops, float(moved))


def _memory(op: ShapedOp) -> Work | None:
    tensors, t = _tensors(op), _type(op, 0)
    if not tensors or t is None:
        return None
    written = 0 if op.name in REDUCTIONS else max(e * s for e, s in tensors)
    return Work("elementwise", t[0], None, float(sum(e * s for e, s in tensors) + written))


def _text(op: ShapedOp, i: int) -> str | None:
    c = op.concrete[i] if i < len(op.concrete) else None
    return c if isinstance(c, str) else None


def _ints(op: ShapedOp, i: int) -> list[int] | None:
    text = (_text(op, i) or "").strip("[] ")
    try:
        return [int(v) for v in text.split(",")] if text else None
    except ValueError:
        return None


_FLOP_OPS: dict[str, Callable[[ShapedOp], Work | None]] = {
    "aten::mm": lambda op: _matmul(op, 0),
    "aten::bmm": lambda op: _matmul(op, 0),
    "aten::addmm": lambda op: _matmul(op, 1),
    "aten::baddbmm": lambda op: _matmul(op, 1),
    "aten::convolution": lambda op: _conv(op, backward=False),
    "aten::convolution_backward": lambda op: _conv(op, backward=True),
}


def is_known(name: str) -> bool:
    """Whether :func:`work_of` has a formula for the operator ``name``."""
    return name in _FLOP_OPS or name in ELEMENTWISE or name in REDUCTIONS or _is_attention(name)


def _is_attention(name: str) -> bool:
    return "scaled_dot_product" in name and "attention" in name


def work_of(op: ShapedOp) -> Work | None:
    """The work of ``op`` from its shapes; None where they do not tell (no formula,
    shapes missing or of an unexpected rank)."""
    if op.name in _FLOP_OPS:
        return _FLOP_OPS[op.name](op)
    if _is_attention(op.name):
        return _attention(op, backward=op.name.endswith("_backward"))
    if op.name in ELEMENTWISE or op.name in REDUCTIONS:
        return _memory(op)
    return None


def has_flops(op: ShapedOp) -> bool:
    """Whether ``op`` does arithmetic worth counting (a FLOP count or a formula)."""
    return op.flops is not None or op.name in _FLOP_OPS or _is_attention(op.name)


def kind_of_op(name: str) -> str:
    """The kind of work the operator ``name`` does, from its name alone ("other": not
    one :func:`work_of` knows)."""
    if _is_attention(name):
        return "attention"
    if "convolution" in name and name in _FLOP_OPS:
        return "convolution"
    if name in _FLOP_OPS:
        return "matmul"
    return "elementwise" if name in ELEMENTWISE or name in REDUCTIONS else "other"
