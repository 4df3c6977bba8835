"""Ranks from the trace's node ids: ``<rank>-<host>`` or ``<pid>-<host>``.

The predecessor names a trace by ``<n>-<host>``, where ``n`` is the process's rank in
a distributed job and its pid otherwise (docs/sagemaker.md). When the numbers of all
the ids are exactly 0..N-1 they are ranks; otherwise they are pids, and ranks are
given in the order of (host, pid). ``local_rank`` is the order on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepscope.importers.sagemaker._trace import split_node_id


@dataclass(frozen=True)
class RankOf:
    """Where one trace node id lands."""

    rank: int
    local_rank: int
    node: str
    pid: int


def assign(node_ids: list[str]) -> tuple[dict[str, RankOf], str]:
    """Each node id's rank, local rank, node and pid; and how the ranks were found."""
    split = {nid: split_node_id(nid) for nid in node_ids}
    numbers = [n for n, _ in split.values()]
    are_ranks = None not in numbers and sorted(numbers) == list(range(len(numbers)))  # type: ignore[type-var]
    order = sorted(node_ids, key=lambda nid: (split[nid][0] if are_ranks else 0, split[nid][1],
                                             split[nid][0] or 0, nid))  # fmt: skip
    out: dict[str, RankOf] = {}
    per_host: dict[str, int] = {}
    for rank, nid in enumerate(order):
        number, host = split[nid]
        local = per_host.get(host, 0)
        per_host[host] = local + 1
        pid = 0 if are_ranks or number is None else number
        out[nid] = RankOf(number if are_ranks and number is not None else rank, local, host, pid)
    how = (
        "the trace ids' rank numbers" if are_ranks else "the order of (host, pid) of the trace ids"
    )
    return out, how
