"""The saved tensors of one rank, arranged for the report's table and charts.

Rows are those of ``Tensors.scalars()`` (losses, recorded scalars, stored
reductions), plus an l2 norm computed from the raw tensors of weights and
gradients that have no stored one, within a bound on what is read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.read import Tensors, np_reduce

VALUE = "value"
RAW_L2 = "l2 (from raw)"
RAW_TENSORS = 12  # raw-only weights/gradients whose l2 is computed
RAW_STEPS = 50  # saved steps per tensor and phase read for it, evenly spread
RAW_BYTES = 256 * 1024 * 1024  # raw bytes read in all
BUILTIN = ("losses", "weights", "biases", "inputs", "outputs", "optimizer_variables")

#: A row of the tensors table: name, kind, train steps, eval steps, what is stored.
SummaryRow = tuple[str, str, str, str, str]
#: Where a chart goes: values before reductions, l2 first, training first, by family.
ChartRank = tuple[int, bool, int, str, str]


def families(names: list[str], collections: dict[str, list[str]]) -> dict[str, str]:
    """What each tensor is, for grouping: gradients, weights, losses, a user collection..."""
    member: dict[str, list[str]] = {}
    for coll, members in collections.items():
        for name in members if isinstance(members, list) else []:
            member.setdefault(str(name), []).append(str(coll))
    out = {}
    for name in names:
        cols = member.get(name, [])
        if name.startswith("gradient/"):
            out[name] = "gradients"
        elif name.startswith("optimizer/"):
            out[name] = "optimizer_variables"
        else:
            known = [c for c in BUILTIN if c in cols]
            user = [c for c in cols if c not in ("all", "default") and c not in BUILTIN]
            out[name] = (known or user or ["losses" if "default" in cols else "other"])[0]
    return out


def _span(steps: pd.Series) -> str:
    if steps.empty:
        return "\u2013"
    return f"{steps.nunique()} ({int(steps.min())}\u2013{int(steps.max())})"


def summary_rows(
    scalars: pd.DataFrame, index: pd.DataFrame, fams: dict[str, str]
) -> list[SummaryRow]:
    """One row per tensor: name, kind, train steps, eval steps, what is stored."""
    both = pd.concat([scalars[["name", "phase", "step"]], index[["name", "phase", "step"]]])
    keys = scalars.groupby("name")["key"].unique() if len(scalars) else pd.Series(dtype=object)
    raw = index.drop_duplicates("name", keep="last").set_index("name") if len(index) else None
    rows: list[SummaryRow] = []
    for name, rows_of in both.groupby("name", sort=True):
        stored = sorted(str(k) for k in keys.get(name, []))
        if raw is not None and name in raw.index:
            r = raw.loc[name]
            stored.append(f"raw {r['dtype']} {[int(d) for d in r['shape']]}")
        steps = {p: rows_of.loc[rows_of["phase"] == p, "step"] for p in ("train", "eval")}
        rows.append(
            (
                name,
                fams.get(str(name), "other"),
                _span(steps["train"]),
                _span(steps["eval"]),
                ", ".join(stored),
            )
        )
    return rows


def _raw_candidates(index: pd.DataFrame, scalars: pd.DataFrame, fams: dict[str, str]) -> list[str]:
    have = set(scalars.loc[scalars["key"] == "l2", "name"])
    names = sorted(set(index["name"]) - have)
    return [n for n in names if fams.get(n) in ("weights", "biases", "gradients")][:RAW_TENSORS]


def raw_l2(
    t: Tensors, index: pd.DataFrame, scalars: pd.DataFrame, fams: dict[str, str]
) -> pd.DataFrame:
    """The l2 norm of raw-only weights and gradients at up to ``RAW_STEPS`` steps each."""
    cols = ["time", "phase", "step", "name", "key", "value"]
    out: list[tuple[float, str, int, str, str, float]] = []
    budget = RAW_BYTES
    for name in _raw_candidates(index, scalars, fams) if len(index) else []:
        for phase, rows in index[index["name"] == name].groupby("phase"):
            rows = rows.drop_duplicates("step", keep="last")
            pick = np.unique(np.linspace(0, len(rows) - 1, min(RAW_STEPS, len(rows))).astype(int))
            for row in (rows.iloc[i] for i in pick):
                budget -= int(row["nbytes"])
                if budget < 0:
                    return pd.DataFrame(out, columns=cols)
                value = np_reduce(t.load(row), "l2")
                out.append((float(row["time"]), phase, int(row["step"]), name, RAW_L2, value))
    return pd.DataFrame(out, columns=cols)


def chart_groups(rows: pd.DataFrame, fams: dict[str, str]) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows) per chart: values first (losses together, other scalars one by one),
    then reductions by kind, l2 first; names in one chart share their saved steps."""
    groups: list[tuple[ChartRank, str, pd.DataFrame]] = []
    for (phase, key), part in rows.groupby(["phase", "key"], sort=False):
        steps_of = part.groupby("name")["step"].apply(lambda s: tuple(sorted(set(s))))
        for _steps, names in steps_of.groupby(steps_of):
            for fam, members in _by_family(list(names.index), fams, key == VALUE):
                sub = part[part["name"].isin(members)]
                title = _title(fam, members, str(key), str(phase))
                groups.append((_rank(fam, str(key), str(phase)), title, sub))
    groups.sort(key=lambda g: g[0])
    return [(title, sub) for _rank_, title, sub in groups]


def _by_family(names: list[str], fams: dict[str, str], values: bool) -> list[tuple[str, list[str]]]:
    out: dict[str, list[str]] = {}
    for n in sorted(names):
        fam = fams.get(n, "other")
        # Losses share a chart; every other scalar has a scale of its own.
        out.setdefault(fam if (fam == "losses" or not values) else f"{fam}:{n}", []).append(n)
    return [(k.split(":", 1)[0], v) for k, v in out.items()]


def _title(fam: str, members: list[str], key: str, phase: str) -> str:
    if key == VALUE:
        return f"{'losses' if fam == 'losses' else members[0]} ({phase})"
    return f"{fam}: {key} ({phase})"


def _rank(fam: str, key: str, phase: str) -> ChartRank:
    order = ["losses", "gradients", "weights", "biases", "optimizer_variables"]
    fam_rank = order.index(fam) if fam in order else len(order)
    key_rank = 0 if key == VALUE else 1 if key.startswith("l2") else 2
    return (key_rank, phase != "train", fam_rank, key, phase)
