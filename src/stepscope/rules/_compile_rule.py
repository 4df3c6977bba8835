"""TorchCompile: ``torch.compile`` recompiles a function again and again, or breaks graphs.

From the agent's ``compile``, ``recompile`` and ``graph_break`` events (docs/format.md),
per node:

* a function that recompiled more than ``max_recompiles`` times (or hit dynamo's
  ``recompile_limit``, after which it runs uncompiled), named with its file and line
  and the guard that failed last (e.g. ``tensor 'x' size mismatch at index 0``);
* more than ``max_graph_breaks`` graph breaks, named with their most frequent reasons.

The cost is dynamo's compile time (``compile_seconds``, all functions; None when
dynamo did not say). A job that never imported ``torch._dynamo`` has no such events:
``NotApplicable``.
"""

from __future__ import annotations

import pandas as pd

from stepscope.rules._cpu_facts import _count, _details
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._params import Param
from stepscope.rules._types import Finding
from stepscope.rules._windows import severity

KINDS = ("compile", "recompile", "graph_break")
TOP_REASONS = 3  # graph-break reasons named in a finding
SHOWN = 200  # characters of a reason in a message


def _short(text: object) -> str:
    """The first line of a dynamo reason, with its ``Explanation:`` line (which names
    the cause: "... builtin operator `print` ...") when it has one."""
    lines = [x.strip() for x in str(text).strip().splitlines() if x.strip()] or ["?"]
    why = [x.removeprefix("Explanation:").strip() for x in lines if x.startswith("Explanation:")]
    line = f"{lines[0]}: {why[0]}" if why else lines[0]
    return line if len(line) <= SHOWN else line[: SHOWN - 3] + "..."


class TorchCompile(NodeRule):
    name = "TorchCompile"
    description = (
        "torch.compile recompiles a function more than max_recompiles times (or hits "
        "dynamo's recompile_limit), or breaks its graphs more than max_graph_breaks times."
    )
    recommendation = (
        "Recompiles: keep the guard that failed stable, e.g. torch._dynamo.mark_dynamic(x, "
        "dim) or torch.compile(dynamic=True) for changing shapes, a tensor instead of a "
        "changing Python int/float, fixed-size (padded) batches; raise "
        "torch._dynamo.config.recompile_limit only when the variants are few and wanted. "
        "Graph breaks: remove the named cause from the compiled code (print, .item(), "
        "data-dependent Python control flow; TORCH_LOGS=graph_breaks shows where)."
    )
    params = (
        Param("max_recompiles", 2, "recompilations of one function beyond which it fires", int),
        Param("max_graph_breaks", 0, "graph breaks (all reasons) beyond which it fires", int),
    )

    def check(self, data: RuleInput) -> Part:
        ev = data.events
        rows = ev[ev["kind"].isin(KINDS)].sort_values("time") if len(ev) else ev
        if not len(rows):
            return Part(na_reason="no compile events: the job did not use torch.compile")
        details = _details(rows)
        kinds = list(rows["kind"])
        node = str(rows["node"].iloc[0]) if "node" in rows else None
        seconds = [d.get("compile_seconds") for d in details]
        known = [float(s) for s in seconds if isinstance(s, int | float)]
        findings = self._recompiles(kinds, details, rows, node)
        findings += self._breaks(kinds, details, rows, node)
        graphs = max((_count(d.get("unique_graphs")) or 0 for d in details), default=0)
        info = {"compile_seconds": max(known) if known else None, "graphs": graphs}
        return Part(
            findings,
            len(findings),
            max(graphs, len(rows)),
            details={k: v for k, v in info.items() if v is not None},
            cost_seconds=max(known) if findings and known else None,
        )

    def _recompiles(
        self,
        kinds: list[str],
        details: list[dict[str, object]],
        rows: pd.DataFrame,
        node: str | None,
    ) -> list[Finding]:
        limit = self.p_int("max_recompiles")
        last: dict[tuple[str, str, int], tuple[int, dict[str, object]]] = {}
        for i, (kind, d) in enumerate(zip(kinds, details, strict=True)):
            if kind == "recompile":
                key = (str(d.get("function")), str(d.get("file")), _count(d.get("line")) or 0)
                last[key] = (i, d)
        out = []
        for (fn, file, line), (i, d) in last.items():
            total, cap = _count(d.get("total")) or 0, _count(d.get("recompile_limit"))
            hit = cap is not None and total >= cap
            if total <= limit and not hit:
                continue
            capped = f", hit recompile_limit={cap}: it now runs uncompiled" if hit else ""
            out.append(
                Finding(
                    f"{node}: {fn} ({file}:{line}) recompiled {total} times{capped}; "
                    f"last failed guard: {_short(d.get('reason'))}",
                    self.recommendation,
                    1.0 if hit else severity(total, limit, 4 * max(limit, 1)),
                    node=node,
                    rank=int(rows["rank"].iloc[i]),
                    start=float(rows["time"].iloc[i]),
                    value=float(total),
                    threshold=float(limit),
                )
            )
        return out

    def _breaks(
        self,
        kinds: list[str],
        details: list[dict[str, object]],
        rows: pd.DataFrame,
        node: str | None,
    ) -> list[Finding]:
        counts: dict[str, int] = {}
        for kind, d in zip(kinds, details, strict=True):
            if kind == "graph_break":
                reason = _short(d.get("reason"))
                counts[reason] = counts.get(reason, 0) + (_count(d.get("count")) or 0)
        total, limit = sum(counts.values()), self.p_int("max_graph_breaks")
        if total <= limit:
            return []
        top = sorted(counts.items(), key=lambda x: -x[1])[:TOP_REASONS]
        named = "; ".join(f"{n}x {r}" for r, n in top)
        return [
            Finding(
                f"{node}: {total} graph break(s) in compiled code: {named}",
                self.recommendation,
                severity(total, limit, limit + 10),
                node=node,
                value=float(total),
                threshold=float(limit),
            )
        ]
