"""Graph breaks and recompilations of ``torch.compile``, from dynamo's own counters.

Read on the writer's thread at each flush (and once at the agent's stop), only once
the script has imported ``torch._dynamo``: importing it ourselves is slow and tells
nothing about a job that does not compile. Each read writes the deltas since the last
one as events (docs/format.md):

* ``graph_break``: a new reason (``counters["graph_break"]``: reason -> count) and how
  many more times it broke; the reason's text is cut to ``MAX_REASON`` characters;
* ``recompile``: a function whose guards failed again (``utils.guard_failures``:
  code -> the failed guards, oldest first): its name, file and line, the new
  recompilations, the total, the last failed guard, and dynamo's ``recompile_limit``.

* ``compile`` once, at the agent's stop: the totals (``frames`` compiled,
  ``unique_graphs``, ``graph_breaks``, ``recompiles``, ``recompile_limit``), so a
  compiled job without a problem still says that it compiled (none when dynamo
  compiled no frame: ``torch.optim`` imports dynamo in jobs that never compile).

All carry ``compile_seconds``: dynamo's total compile time so far (all functions).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable

from stepscope.agent._faults import FaultBoundary

Event = Callable[..., None]  # AgentWriter.event(kind, **detail)
MAX_REASON = 400  # characters of a reason kept: dynamo's texts run to a page of hints
MAX_EVENTS = 20  # events of each kind per read: a loop of new breaks never floods the job
# "0/3: tensor 'x' size mismatch ...": frame id / compile id, then the guard that failed
_COMPILE_ID = re.compile(r"^\s*\[?(\d+)/(\d+)\]?[^:]*:\s*")


def _cut(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def _compile_seconds(utils: object) -> float | None:
    metrics = getattr(utils, "compilation_time_metrics", None)
    if not isinstance(metrics, dict):
        return None
    return round(float(sum(metrics.get("_compile.compile_inner", ()))), 6)


def _recompile_limit() -> int | None:
    config = sys.modules.get("torch._dynamo.config")
    for name in ("recompile_limit", "cache_size_limit"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return None


class CompileWatch:
    """Writes dynamo's new graph breaks and recompilations; faults go to the boundary."""

    def __init__(self, event: Event, faults: FaultBoundary) -> None:
        self.event, self.faults = event, faults
        self._breaks: dict[str, int] = {}
        self._seen: dict[tuple[str, str, int], int] = {}  # function -> reasons read
        self._recompiles: dict[tuple[str, str, int], int] = {}
        self._lock = threading.Lock()  # the writer's thread, and the stop's last read

    def poll(self) -> None:
        """Read the counters if the script imported dynamo (a cheap return otherwise)."""
        utils = sys.modules.get("torch._dynamo.utils")
        if utils is None:
            return
        try:
            with self._lock:
                self._read(utils)
        except Exception as exc:
            self.faults.record("compile-watch", exc)

    def finish(self) -> None:
        """The last read and the ``compile`` totals (at the agent's stop)."""
        self.poll()
        utils = sys.modules.get("torch._dynamo.utils")
        if utils is None:
            return
        try:
            counters = getattr(utils, "counters", {})
            frames = int(dict(counters.get("frames", {})).get("total", 0))
            if not frames:
                return  # imported by torch itself (torch.optim does), nothing compiled
            self.event(
                "compile",
                frames=frames,
                unique_graphs=int(dict(counters.get("stats", {})).get("unique_graphs", 0)),
                graph_breaks=sum(self._breaks.values()),
                recompiles=sum(self._recompiles.values()),
                recompile_limit=_recompile_limit(),
                compile_seconds=_compile_seconds(utils),
            )
        except Exception as exc:
            self.faults.record("compile-watch", exc)

    def _read(self, utils: object) -> None:
        seconds = _compile_seconds(utils)
        self._read_breaks(utils, seconds)
        self._read_recompiles(utils, seconds)

    def _read_breaks(self, utils: object, seconds: float | None) -> None:
        counters = getattr(utils, "counters", None)
        if not isinstance(counters, dict):
            return
        now = dict(counters.get("graph_break", {}))  # a C-level copy: safe beside compiles
        new = [(r, int(n) - self._breaks.get(r, 0)) for r, n in now.items()]
        new = sorted((x for x in new if x[1] > 0), key=lambda x: -x[1])
        for reason, count in new[:MAX_EVENTS]:
            self.event(
                "graph_break",
                reason=_cut(str(reason)),
                count=count,
                total=int(now[reason]),
                compile_seconds=seconds,
            )
        self._breaks.update({str(r): int(n) for r, n in now.items()})

    def _read_recompiles(self, utils: object, seconds: float | None) -> None:
        failures = getattr(utils, "guard_failures", None)
        if not isinstance(failures, dict):
            return
        written = 0
        for code, reasons in list(failures.items()):
            key = (str(code.co_name), str(code.co_filename), int(code.co_firstlineno))
            reasons = list(reasons)
            fresh = reasons[self._seen.get(key, 0) :]
            self._seen[key] = len(reasons)
            count = self._count(fresh)
            if not count:
                continue
            total = self._recompiles.get(key, 0) + count
            self._recompiles[key] = total  # counted whether or not its event is written
            if written >= MAX_EVENTS:
                continue
            written += 1
            self.event(
                "recompile",
                function=key[0],
                file=key[1],
                line=key[2],
                count=count,
                total=total,
                reason=_cut(_COMPILE_ID.sub("", str(fresh[-1]), count=1)),
                recompile_limit=_recompile_limit(),
                compile_seconds=seconds,
            )

    @staticmethod
    def _count(reasons: list[object]) -> int:
        """Recompilations among ``reasons``: a recompile fails every cached entry, the
        first (compile id 0) included, so the failures of the lowest id count them."""
        ids = [m.group(2) for m in (_COMPILE_ID.match(str(r)) for r in reasons) if m]
        if not ids:
            return len(reasons)  # an unknown format: one failed guard per recompile
        low = min(ids, key=int)
        return sum(1 for i in ids if i == low)
