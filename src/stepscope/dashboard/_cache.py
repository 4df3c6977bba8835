"""Caches that make many viewers cheap: answers by key, summaries by bytes.

:class:`Answers` keeps computed answers (chart JSON) by a key that includes the
stream's signature (:mod:`._streams`), so a stale answer is never served;
concurrent requests for the same key wait for one computation instead of
repeating it. :class:`Sized` keeps the per-segment summaries of :mod:`._reduce`,
bounded by their total size in bytes, least recently used first out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
MAX_ANSWERS = 512
MAX_SUMMARY_BYTES = 256 * 2**20  # a 24-h node: ~40 MB (its segments and their combination)


class HasBytes(Protocol):
    @property
    def nbytes(self) -> int: ...


S = TypeVar("S", bound=HasBytes)


_MISSING = object()


class _Lru:
    """The part both caches share: a lock, values in use order, hit counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self.hits = self.misses = 0

    def _hit(self, key: Hashable) -> Any:
        """The value of ``key`` made most recent, or ``_MISSING`` (hold the lock)."""
        if key not in self._values:
            return _MISSING
        self.hits += 1
        self._values.move_to_end(key)
        return self._values[key]


class Answers(_Lru):
    """A bounded LRU of computed answers with one computation per key at a time."""

    def __init__(self, max_entries: int = MAX_ANSWERS) -> None:
        super().__init__()
        self._busy: dict[Hashable, threading.Lock] = {}
        self.max_entries = max_entries

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The cached answer for ``key``, computing it (once) when missing."""
        with self._lock:
            found = self._hit(key)
            if found is not _MISSING:
                return found
            busy = self._busy.setdefault(key, threading.Lock())
        with busy:
            with self._lock:
                found = self._hit(key)
                if found is not _MISSING:
                    return found
            self.misses += 1
            value = compute()
            with self._lock:
                self._values[key] = value
                self._busy.pop(key, None)
                while len(self._values) > self.max_entries:
                    self._values.popitem(last=False)
        return value


class Sized(_Lru):
    """A LRU of values with an ``nbytes``, holding at most ``max_bytes`` of them."""

    def __init__(self, max_bytes: int = MAX_SUMMARY_BYTES) -> None:
        super().__init__()
        self.max_bytes, self.nbytes = max_bytes, 0

    def get(self, key: Hashable, compute: Callable[[], S]) -> S:
        """The cached value of ``key``, else ``compute()`` (kept if it fits)."""
        with self._lock:
            found = self._hit(key)
            if found is not _MISSING:
                return found
            self.misses += 1
        value = compute()  # outside the lock: parts are summarized in parallel
        with self._lock:
            if key not in self._values and value.nbytes <= self.max_bytes:
                self._values[key] = value
                self.nbytes += value.nbytes
            while self.nbytes > self.max_bytes:
                _, gone = self._values.popitem(last=False)
                self.nbytes -= gone.nbytes
        return value
