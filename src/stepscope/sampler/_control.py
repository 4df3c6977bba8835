"""Live changes of a node's sampling interval: ``config`` control requests.

The sampler process itself polls the job's ``control/`` folder about once a
second (``control.request_interval`` writes the requests), so the change needs
no launcher, works wherever the job folder lives, and shows in the job's data
at once: every sample carries the ``interval_ms`` in force, and
``nodes/<node>.json`` is rewritten with the new one. Every node's sampler
applies a request; each acknowledges it (the same answer: last write wins).
"""

from __future__ import annotations

import time
from typing import Protocol

from stepscope.jobfolder import control
from stepscope.sampler._encoding import validate_interval_ms
from stepscope.store import Store

POLL_S = 1.0
KEY = "system_monitor_interval_millis"
_ENVELOPE = {"kind", "by", "time", "pid"}


class IntervalSetter(Protocol):
    """What takes a new interval: the sampler (``Sampler.set_interval``)."""

    def set_interval(self, ms: int) -> None: ...


def parse_interval(body: object) -> int:
    """The interval a ``config`` request asks for; ValueError says what is wrong."""
    if not isinstance(body, dict):
        raise ValueError("the request is not a JSON object")
    unknown = sorted(set(body) - _ENVELOPE - {KEY})
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))}; valid: {KEY!r}")
    if KEY not in body:
        raise ValueError(f"missing {KEY!r}")
    return validate_interval_ms(body[KEY])


class IntervalRequests:
    """Takes ``config`` requests for one sampler, at most once per ``POLL_S``."""

    def __init__(self, store: Store, node: str, poll_s: float = POLL_S) -> None:
        self.store, self.node = store, node
        self.poll_s = max(poll_s, store.min_interval_s)  # object stores: fewer requests
        self._requests = control.Requests(store, "config")
        self._next = 0.0

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def take(self, sampler: IntervalSetter) -> None:
        """Apply new requests to ``sampler`` (``set_interval``) and acknowledge them."""
        self._next = time.monotonic() + self.poll_s
        for name, body in self._requests.pending():
            try:
                ms = parse_interval(body)
            except ValueError as exc:
                control.acknowledge(self.store, name, False, str(exc))
                continue
            sampler.set_interval(ms)
            control.acknowledge(self.store, name, True, f"node {self.node} samples every {ms} ms")
