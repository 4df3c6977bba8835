"""TorchCompile on events as the agent writes them (docs/format.md): the thresholds,
the recompile limit, the break reasons named, and NotApplicable without events.
The real compiled training is in tests/test_rules_compile.py."""

from __future__ import annotations

import json

import pandas as pd

from stepscope.rules import RuleInput, Status, TorchCompile

GUARD = "tensor 'x' size mismatch at index 0. expected 4, actual 7"
PRINT = "Failed to trace builtin operator\n  Explanation: cannot trace `print`\n  Hint: ..."


def _input(*rows: tuple[str, dict[str, object]]) -> RuleInput:
    frame = pd.DataFrame(
        {
            "time": [100.0 + i for i in range(len(rows))],
            "rank": [0] * len(rows),
            "local_rank": [0] * len(rows),
            "node": ["n0"] * len(rows),
            "pid": [1] * len(rows),
            "kind": [k for k, _ in rows],
            "detail": [json.dumps(d) for _, d in rows],
        }
    )
    return RuleInput(events=frame)


def _recompile(total: int, limit: int = 8) -> tuple[str, dict[str, object]]:
    return "recompile", {"function": "forward", "file": "t.py", "line": 3, "count": 1,
                         "total": total, "reason": GUARD, "recompile_limit": limit,
                         "compile_seconds": 1.5}  # fmt: skip


def _summary(breaks: int = 0) -> tuple[str, dict[str, object]]:
    return "compile", {"frames": 3, "unique_graphs": 3, "graph_breaks": breaks,
                       "recompiles": 0, "compile_seconds": 0.5}  # fmt: skip


def test_recompiles_over_the_limit_fire_with_function_and_guard() -> None:
    rule = TorchCompile(max_recompiles=2)
    result = rule.evaluate(_input(_recompile(1), _recompile(3), _summary()))
    assert result.status is Status.ISSUES_FOUND
    (finding,) = result.findings
    assert "forward (t.py:3) recompiled 3 times" in finding.message and GUARD in finding.message
    assert result.cost_seconds == 1.5


def test_recompiles_within_the_limit_are_silent() -> None:
    result = TorchCompile(max_recompiles=2).evaluate(_input(_recompile(2), _summary()))
    assert result.status is Status.NO_ISSUES_FOUND and result.datapoints > 0


def test_hitting_dynamos_recompile_limit_fires_at_any_threshold() -> None:
    rule = TorchCompile(max_recompiles=100)
    result = rule.evaluate(_input(_recompile(4, limit=4)))
    assert result.status is Status.ISSUES_FOUND
    assert "hit recompile_limit=4" in result.findings[0].message


def test_graph_breaks_name_their_cause() -> None:
    rule = TorchCompile(max_graph_breaks=1)
    two = ("graph_break", {"reason": PRINT, "count": 2, "total": 2})
    result = rule.evaluate(_input(two, _summary(2)))
    assert result.status is Status.ISSUES_FOUND
    assert "2x Failed to trace builtin operator: cannot trace `print`" in result.findings[0].message
    one = ("graph_break", {"reason": PRINT, "count": 1, "total": 1})
    silent = rule.evaluate(_input(one, _summary(1)))
    assert silent.status is Status.NO_ISSUES_FOUND and silent.datapoints > 0


def test_no_compile_events_is_not_applicable() -> None:
    threads = ("threads", {"intra_op": 4})
    result = TorchCompile().evaluate(_input(threads))
    assert result.status is Status.NOT_APPLICABLE
