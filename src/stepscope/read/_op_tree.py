"""Which operator owns the work (and the kernels) of a nested operator, for
:mod:`._efficiency`: a matrix multiply's own copies and fills are part of it, and
no work is counted twice (``aten::div`` inside ``aten::div``; a math attention's
``bmm`` inside ``scaled_dot_product_attention``)."""

from __future__ import annotations

from stepscope.read._flops import has_flops
from stepscope.read._trace import ShapedOp


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
