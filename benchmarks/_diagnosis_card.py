"""The scorecard of ``benchmarks/diagnosis.py``: one row per run, one summary line per
condition (recall, false positives, fixed twins' claims within 1.5x, wall)."""

from __future__ import annotations

from typing import Any

import _diagnosis_twins as twins


def names(xs: list[str]) -> str:
    return ", ".join(xs) or "-"


COLUMNS = (("scenario", 16), ("cond", 4), ("expected (pending)", 34), ("missed", 19),
           ("false positives", 34), ("wall", 5), ("also fired (tolerated)", 34),
           ("fixed twin: claimed saving vs measured", 0))  # fmt: skip


def line(cells: list[str]) -> str:
    return " ".join(c.ljust(w) for c, (_, w) in zip(cells, COLUMNS, strict=True)).rstrip()


def row(r: dict[str, Any]) -> str:
    s = r["score"]
    expected = names(s["expected"] + [f"({x})" for x in s["pending"]])
    wall = f"{r['wall_s']:.0f} s" + ("" if r["code"] == 0 else f" exit {r['code']}")
    if not r["statuses"]:  # the product gave no verdict at all: say so, it is not a pass
        why = f"no rules/: see {r['scenario']}-{r['condition']}/faults"
        return line([r["scenario"], r["condition"], names(s["expected"]), "NO VERDICTS", why,
                     wall, "", ""])  # fmt: skip
    cells = [r["scenario"], r["condition"], expected, names(s["missed"]), names(s["false"])]
    return line([*cells, wall, names(s["side"]), twins.text(r.get("twin"))])


def summary(results: list[dict[str, Any]], condition: str) -> str:
    rs = [r for r in results if r["condition"] == condition]
    expected = sum(len(r["score"]["expected"]) for r in rs)
    hits = sum(len(r["score"]["hit"]) for r in rs)
    false = sum(len(r["score"]["false"]) for r in rs)
    healthy = [r for r in rs if r["healthy"]]
    bad = sum(1 for r in healthy if r["score"]["false"])
    pending = sorted({p for r in rs for p in r["score"]["pending"]})
    recall = f"{hits}/{expected} = {hits / expected:.0%}" if expected else "-"
    pairs = [r["twin"] for r in rs if r.get("twin")]
    held = sum(1 for t in pairs if t["ok"])
    unsettled = sum(1 for t in pairs if t.get("verdict") == "unsettled")
    open_ = f", {unsettled} unsettled by the spread between runs" if unsettled else ""
    broad = sum(1 for t in pairs if twins.wide(t))
    open_ = f" ({broad} wide{open_})" if broad or unsettled else ""
    minutes = sum(wall(r) for r in rs) / 60
    return (f"{condition}: recall {recall}; false positives {false} in {len(rs)} runs "
            f"({bad} of {len(healthy)} healthy runs); claimed savings within "
            f"{twins.FACTOR:g}x of the fixed twins' {held}/{len(pairs)}{open_}; pending (not in "
            f"this build): {names(pending)}; wall {minutes:.1f} min")  # fmt: skip


def scorecard(results: list[dict[str, Any]]) -> str:
    lines = [line([name for name, _ in COLUMNS]), *(row(r) for r in results), ""]
    conditions = dict.fromkeys(r["condition"] for r in results)
    return "\n".join(lines + [summary(results, c) for c in conditions])


def wall(r: dict[str, Any]) -> float:
    """A run's wall time with its fixed twin's (s)."""
    return float(r["wall_s"]) + float((r.get("twin") or {}).get("wall_s", 0.0))
