"""Benchmark: one new run against K baseline runs (issue 34), replayed on the jobs that
``benchmarks/compare.py --runs K --out DIR`` kept.

    python benchmarks/compare_replay.py DIR [--base-runs K]

Per pair ``i`` of each condition folder under DIR (``quiet/``, ``hog/``), the baseline is
the pair's first K runs ``base-i-0..``; each of its reruns ``rerun-i-j`` and planted runs
``planted-i-j`` is compared alone against it (what a CI job with a kept baseline does),
in process with :func:`stepscope.analysis.compare.compare_sides`. Counts "no difference"
among the reruns and "slower" among the planted runs. The runs of one pair share the
baseline, so the comparisons of a pair are not independent: the pairs are the unit.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import stepscope
from stepscope.analysis.compare import compare_sides


def replay(folder: Path, k: int) -> dict[str, object]:
    pairs = sorted({int(p.name.split("-")[1]) for p in folder.glob("base-*-*")})
    rows = []
    for i in pairs:
        base = [stepscope.open(str(p)) for p in sorted(folder.glob(f"base-{i}-*"))[:k]]
        for kind in ("rerun", "planted"):
            for path in sorted(folder.glob(f"{kind}-{i}-*")):
                (train, *_) = compare_sides(base, [stepscope.open(str(path))]).phases
                rows.append({"pair": i, "kind": kind, "run": path.name,
                             "direction": train.direction, "mostly": train.mostly,
                             "verdict": train.verdict})  # fmt: skip
    same = [r for r in rows if r["kind"] == "rerun"]
    planted = [r for r in rows if r["kind"] == "planted"]
    return {
        "condition": folder.name,
        "base_runs": k,
        "pairs": len(pairs),
        "no_difference": sum(r["direction"] == "same" for r in same),
        "reruns": len(same),
        "slower_found": sum(r["direction"] == "slower" for r in planted),
        "named_other": sum(r["mostly"] == "other" for r in planted),
        "planted": len(planted),
        "rows": rows,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="the --out folder of benchmarks/compare.py --runs K")
    p.add_argument("--base-runs", type=int, default=5, help="baseline runs (default 5)")
    a = p.parse_args()
    if a.base_runs < 2:
        p.error("--base-runs takes 2 or more: one run against one has no spread")
    results = [replay(d, a.base_runs) for d in sorted(Path(a.out).iterdir()) if d.is_dir()]
    for r in results:
        print(f"{r['condition']}, one run against {r['base_runs']} ({r['pairs']} pairs): "
              f"no difference in {r['no_difference']} of {r['reruns']} reruns; slower in "
              f"{r['slower_found']} of {r['planted']} planted runs "
              f"(named other: {r['named_other']})")  # fmt: skip
    (Path(a.out) / "replay.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
